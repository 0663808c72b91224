"""Fuzz the site's API and pages' JSON with schemathesis against a running server, from the OpenAPI
description it serves (/api/v1/openapi.json, autoexperiment_site.openapi), and print the run's counts.

    python scripts/fuzz_api.py --url http://127.0.0.1:8000 --token aet_... [--max-examples 25]
        [--example id=12] [--require-found]

Every operation gets property-based requests (schemathesis's examples, coverage and fuzzing phases,
bounded by --max-examples per operation); the checks: no 5xx, every status documented, every body
matching its schema. The token (Settings > API tokens) authenticates the submission operations;
without one they are exercised only as refusals (401). The rate limits of the server apply: run it
with generous RATE_LIMIT_* settings (tests/deploy/test_api_fuzz.py does), or the 429s (documented)
crowd out the rest.

Invented slugs and ids only reach the 404s, so before the run the script finds real objects through
the pages' own JSON (the leaderboard's systems, their suite, a paper, one of its functions and
experiments) and gives them to schemathesis as named examples of the parameters that name an object,
in a copy of the description: the published one never holds data-dependent examples. `--example
NAME=VALUE` adds or replaces one (a submission's `id`: no page lists submissions). Afterwards it
counts the statuses each such operation got (from schemathesis's HAR report) and prints them;
`--require-found` fails the run when one of them never answered 200.

Exit status: schemathesis's (0: no failure), else 3 when --require-found found an operation that never
answered 200. schemathesis's summary ends with the counts of operations, test cases and failures.
"""
from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

CHECKS = ("not_a_server_error", "status_code_conformance", "response_schema_conformance", "content_type_conformance")
PHASES = "examples,coverage,fuzzing"
# The example's name: schemathesis puts equally named examples of different parameters in one request,
# so a paper's function is asked for in that paper.
EXAMPLE_NAME = "known"
METHODS = ("get", "post", "put", "patch", "delete")


def command(*, url: str, schema: str, token: str = "", max_examples: int = 25, seed: int = 0, workers: int = 1,
            phases: str = PHASES, har: str = "") -> list[str]:
    """The schemathesis command line: `schema` is the description's URL or a file holding a copy."""
    schemathesis = Path(sys.executable).with_name("schemathesis")
    arguments = [
        str(schemathesis), "run", schema, "--url", url.rstrip("/"),
        "--checks", ",".join(CHECKS), "--max-examples", str(max_examples), "--seed", str(seed),
        "--phases", phases, "--workers", str(workers), "--request-timeout", "60",
        "--continue-on-failure", "--suppress-health-check", "too_slow,filter_too_much",
        # The deprecated aliases are the v1 views under another path: fuzzing them again doubles the time.
        "--exclude-deprecated",
    ]
    if har:
        arguments += ["--report", "har", "--report-har-path", har]
    if token:
        arguments += ["--header", f"Authorization: Token {token}"]
    return arguments


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response)


def discover(url: str) -> dict[str, str]:
    """Objects the server holds, found through its pages' JSON: parameter name -> a value naming one.

    The leaderboard (unverified uploads included) gives two systems (`slug`, and `a` and `b` to
    compare) and their suite; the suite's JSON its papers, the first paper with both a function and an
    experiment gives `paper_id`, `func_id` and `exp_id`. Missing objects are left out."""
    base = url.rstrip("/")
    found: dict[str, str] = {}
    board = _get_json(f"{base}/?format=json&unverified=1")
    systems = [row for row in board["rows"] if not row["reference"]]
    if systems:
        found.update(slug=systems[0]["slug"], a=systems[0]["slug"], suite=systems[0]["suite"])
    if len(systems) > 1:
        found["b"] = systems[1]["slug"]
    if "suite" not in found:
        return found
    suite = urllib.parse.quote(found["suite"], safe="")
    for paper in _get_json(f"{base}/benchmark/{suite}/?format=json")["papers"]:
        paper_id = urllib.parse.quote(paper["paper_id"], safe="")
        detail = _get_json(f"{base}/benchmark/{suite}/papers/{paper_id}/?format=json")
        if detail["functions"] and detail["experiments"]:
            found.update(paper_id=paper["paper_id"], func_id=str(detail["functions"][0]["func_id"]),
                         exp_id=str(detail["experiments"][0]["exp_id"]))
            break
    return found


def _naming_parameters(document: dict):
    """(path, method, parameter) of every parameter that names an object: in the path, or a required
    query parameter other than `format` (the comparison's a and b). Deprecated operations are left out,
    as the run leaves them out."""
    for path, item in document["paths"].items():
        for method in METHODS:
            if method not in item or item[method].get("deprecated"):
                continue
            for parameter in [*item.get("parameters", []), *item[method].get("parameters", [])]:
                if parameter["in"] == "path" or (parameter["in"] == "query" and parameter.get("required")
                                                 and parameter["name"] != "format"):
                    yield path, method, parameter


def with_examples(document: dict, examples: dict[str, str]) -> dict:
    """A copy of the description whose object-naming parameters have `examples`' values as named examples."""
    copied = copy.deepcopy(document)
    for _, _, parameter in _naming_parameters(copied):
        if parameter["name"] in examples:
            value = examples[parameter["name"]]
            if parameter["schema"].get("type") == "integer":
                value = int(value)
            parameter["examples"] = {EXAMPLE_NAME: {"value": value}}
    return copied


def _template_pattern(path: str) -> re.Pattern:
    parts = re.split(r"(\{[^}]+\})", path)
    return re.compile("^" + "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts) + "$")


def statuses(har: dict, document: dict) -> dict[tuple[str, str], collections.Counter]:
    """(method, path template) -> how many responses of each status the HAR holds, for the operations
    with a parameter naming an object."""
    operations = sorted({(method.upper(), path) for path, method, _ in _naming_parameters(document)},
                        key=lambda operation: -len(re.sub(r"\{[^}]+\}", "", operation[1])))
    patterns = [(method, path, _template_pattern(path)) for method, path in operations]
    counts = {operation: collections.Counter() for operation in operations}
    for entry in har["log"]["entries"]:
        method, path = entry["request"]["method"], urllib.parse.urlsplit(entry["request"]["url"]).path
        # The template with the most literal text first, should two ever match one path.
        for template_method, template, pattern in patterns:
            if method == template_method and pattern.match(path):
                counts[(method, template)][entry["response"]["status"]] += 1
                break
    return counts


def _report(counts: dict[tuple[str, str], collections.Counter]) -> list[str]:
    """Prints the statuses of each operation; returns those that never answered 200."""
    print("\nStatuses of the operations with a parameter naming an object:")
    for (method, path), counter in sorted(counts.items(), key=lambda item: item[0][1]):
        summary = ", ".join(f"{status}: {count}" for status, count in sorted(counter.items())) or "no request"
        print(f"  {method} {path}  {summary}")
    return [f"{method} {path}" for (method, path), counter in counts.items() if not counter[200]]


def _example_argument(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name or not value:
        raise argparse.ArgumentTypeError(f"--example {text!r}: write NAME=VALUE, e.g. id=12")
    return name, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", default=os.environ.get("AUTOEXPERIMENT_TOKEN", ""), help="an API token (or AUTOEXPERIMENT_TOKEN)")
    parser.add_argument("--max-examples", type=int, default=25, help="examples per operation in the fuzzing phase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--example", type=_example_argument, action="append", default=[], metavar="NAME=VALUE",
                        help="a value for the parameters named NAME (besides those found on the pages)")
    parser.add_argument("--require-found", action="store_true",
                        help="exit 3 unless every operation with a parameter naming an object answered 200 at least once")
    args = parser.parse_args()
    base = args.url.rstrip("/")
    document = _get_json(f"{base}/api/v1/openapi.json")
    examples = {**discover(base), **dict(args.example)}
    print("Known objects:", ", ".join(f"{name}={value}" for name, value in sorted(examples.items())) or "none", flush=True)
    with tempfile.TemporaryDirectory(prefix="fuzz-api-") as scratch:
        schema, har = Path(scratch) / "openapi.json", Path(scratch) / "run.har"
        schema.write_text(json.dumps(with_examples(document, examples)))
        run = command(url=base, schema=str(schema), token=args.token, max_examples=args.max_examples, seed=args.seed,
                      workers=args.workers, har=str(har))
        print("$", " ".join(part if not part.startswith("Authorization") else "Authorization: Token ***" for part in run),
              flush=True)
        returncode = subprocess.run(run, check=False).returncode
        never_found = _report(statuses(json.loads(har.read_text()), document)) if har.exists() else ["(no HAR report)"]
    if returncode:
        return returncode
    if args.require_found and never_found:
        print(f"Never answered 200: {', '.join(never_found)}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
