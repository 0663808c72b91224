"""Fuzz the site's API and pages' JSON with schemathesis against a running server, from the OpenAPI
description it serves (/api/v1/openapi.json, autoexperiment_site.openapi), and print the run's counts.

    python scripts/fuzz_api.py --url http://127.0.0.1:8000 --token aet_... [--max-examples 25]

Every operation gets property-based requests (schemathesis's coverage and fuzzing phases, bounded by
--max-examples per operation); the checks: no 5xx, every status documented, every body matching its
schema. The token (Settings > API tokens) authenticates the submission operations; without one they
are exercised only as refusals (401). The rate limits of the server apply: run it with generous
RATE_LIMIT_* settings (tests/deploy/test_api_fuzz.py does), or the 429s (documented) crowd out the rest.

Exit status: schemathesis's (0: no failure). The summary it prints ends with the counts of operations,
test cases and failures.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CHECKS = ("not_a_server_error", "status_code_conformance", "response_schema_conformance", "content_type_conformance")


def command(*, url: str, token: str = "", max_examples: int = 25, seed: int = 0, workers: int = 1,
            phases: str = "coverage,fuzzing") -> list[str]:
    schemathesis = Path(sys.executable).with_name("schemathesis")
    arguments = [
        str(schemathesis), "run", f"{url.rstrip('/')}/api/v1/openapi.json", "--url", url.rstrip("/"),
        "--checks", ",".join(CHECKS), "--max-examples", str(max_examples), "--seed", str(seed),
        "--phases", phases, "--workers", str(workers), "--request-timeout", "60",
        "--continue-on-failure", "--suppress-health-check", "too_slow,filter_too_much",
        # The deprecated aliases are the v1 views under another path: fuzzing them again doubles the time.
        "--exclude-deprecated",
    ]
    if token:
        arguments += ["--header", f"Authorization: Token {token}"]
    return arguments


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", default=os.environ.get("AUTOEXPERIMENT_TOKEN", ""), help="an API token (or AUTOEXPERIMENT_TOKEN)")
    parser.add_argument("--max-examples", type=int, default=25, help="examples per operation in the fuzzing phase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    run = command(url=args.url, token=args.token, max_examples=args.max_examples, seed=args.seed, workers=args.workers)
    print("$", " ".join(part if not part.startswith("Authorization") else "Authorization: Token ***" for part in run), flush=True)
    return subprocess.run(run, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
