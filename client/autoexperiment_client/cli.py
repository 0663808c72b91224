"""`autoexperiment`: the command line (argparse). Results on stdout, progress and errors on stderr.

Exit status: 0 done; 1 the server refused or could not be reached (its words on stderr); 2 a usage
or configuration problem; 3 `submit` waited past --timeout; 4 the submission ended unverified.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path

from autoexperiment_client import __version__
from autoexperiment_client.api import ApiError, Client
from autoexperiment_client.config import ConfigError, settings_load

CONTEXTS = ("none", "full", "oracle")
# The leaderboard's table: the CSV export's columns a reader compares systems by.
TABLE_COLUMNS = ("system", "suite", "context", "verified", "n", "samples", "attempts", "pass1", "passk", "cost_mean")
REEXECUTING = "reexecuting"
EXIT_SERVER, EXIT_USAGE, EXIT_TIMEOUT, EXIT_UNVERIFIED = 1, 2, 3, 4


class Progress:
    """A text bar on stderr when it is a terminal; otherwise one line per change of state, so a CI
    log shows the stages without a line per poll."""

    WIDTH = 30

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_line = None
        self.drawn = False

    def update(self, label: str, done: int, total: int | None, unit: str = "") -> None:
        if self.tty:
            if total:
                filled = int(self.WIDTH * min(done, total) / total)
                bar = "#" * filled + "-" * (self.WIDTH - filled)
                text = f"\r{label} [{bar}] {done}/{total}{unit}"
            else:
                text = f"\r{label} {done}{unit}"
            self.stream.write(text + "\x1b[K")
            self.stream.flush()
            self.drawn = True
        elif label != self.last_line:
            self.stream.write(label + "\n")
            self.stream.flush()
            self.last_line = label

    def done(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
        self.drawn = False


def _client(args, *, need_token: bool) -> Client:
    settings = settings_load(url=args.url, need_token=need_token)
    return Client(settings.url, settings.token)


def _verdict_lines(body: dict) -> list[str]:
    summary = body.get("summary") or {}
    lines = [
        f"submission {body['id']}: {body['status']}" + (f" ({body['status_detail']})" if body.get("status_detail") else ""),
        f"  suite {body.get('suite')}, agent {body.get('agent')}, model {body.get('model')}",
        f"  attempts {summary.get('attempts')} over {summary.get('samples')} sample(s)",
        f"  reported passed: {summary.get('reported_passed')}",
    ]
    if body.get("reexecution_requested") or summary.get("reexecuted"):
        lines += [
            f"  re-executed: {summary.get('reexecuted')}, passed on re-execution: {summary.get('reexecution_passed')}",
            f"  passed (reported and reproduced): {summary.get('passed')}, mismatches: {summary.get('mismatches')}",
        ]
    if body.get("reexecution_refused"):
        lines.append(f"  re-execution refused: {body['reexecution_refused']}")
    lines.append(f"  verified: {'yes' if body.get('verified') else 'no'}")
    lines.append(f"  {body.get('url')}")
    return lines


def _wait(client: Client, body: dict, *, interval: float, timeout: float, progress: Progress) -> dict:
    """Polls until re-execution is over (the status leaves 'reexecuting'); the bar counts attempts."""
    deadline = time.monotonic() + timeout
    while body.get("status") == REEXECUTING:
        summary = body.get("summary") or {}
        progress.update("re-executing", summary.get("reexecuted") or 0, summary.get("attempts") or None, " attempts")
        if time.monotonic() > deadline:
            progress.done()
            raise TimeoutError(f"submission {body['id']} still re-executing after {timeout:.0f} s; follow it with "
                               f"`autoexperiment status {body['id']}` or at {body.get('url')}")
        time.sleep(interval)
        body = client.submission_get(body["id"])
    summary = body.get("summary") or {}
    progress.update(body.get("status", "?"), summary.get("reexecuted") or 0, summary.get("attempts") or None, " attempts")
    progress.done()
    return body


def command_submit(args) -> int:
    path = Path(args.results)
    if not path.is_file():
        print(f"error: {path}: no such file", file=sys.stderr)
        return EXIT_USAGE
    client = _client(args, need_token=True)
    progress = Progress()
    body = client.submission_create(
        path, reexecute=not args.no_reexecute,
        progress=lambda done, total: progress.update("uploading", done // 1024, (total or 0) // 1024 or None, " KiB"),
    )
    progress.done()
    if args.no_wait or args.no_reexecute:
        print("\n".join(_verdict_lines(body)))
        return 0
    try:
        body = _wait(client, body, interval=args.interval, timeout=args.timeout, progress=progress)
    except TimeoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_TIMEOUT
    print("\n".join(_verdict_lines(body)))
    # Asked to re-execute: anything but verified (refused, incomplete) is a failure a CI job should see.
    return 0 if body.get("verified") else EXIT_UNVERIFIED


def command_status(args) -> int:
    body = _client(args, need_token=True).submission_get(args.id)
    print(json.dumps(body, indent=2) if args.json else "\n".join(_verdict_lines(body)))
    return 0


def command_download(args) -> int:
    directory = Path(args.output)
    if not directory.is_dir():
        print(f"error: {directory}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    progress = Progress()
    path = _client(args, need_token=False).tasks_download(
        suite=args.suite, n=args.n, context=args.context, directory=directory,
        progress=lambda done, total: progress.update("downloading", done // 1024, (total or 0) // 1024 or None, " KiB"),
    )
    progress.done()
    print(path)
    return 0


def _table(csv_text: str) -> str:
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    if not rows:
        return "(no systems)"
    columns = [column for column in TABLE_COLUMNS if column in rows[0]]
    cells = [[_cell(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)) for line in cells]
    return "\n".join(lines)


def _cell(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        return value
    return value if value.isdigit() else f"{number:.3f}"


def command_leaderboard(args) -> int:
    client = _client(args, need_token=False)
    if args.format == "json":
        print(json.dumps(json.loads(client.leaderboard(output="json", suite=args.suite)), indent=2))
    else:
        text = client.leaderboard(output="csv", suite=args.suite).decode("utf-8")
        print(text.rstrip("\n") if args.format == "csv" else _table(text))
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="autoexperiment",
        allow_abbrev=False,
        description="Client of an AutoExperiment site. The token comes from AUTOEXPERIMENT_TOKEN or the config "
                    "file (~/.config/autoexperiment/config.toml, chmod 600), never from the command line.",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    url_help = "the site's URL (else AUTOEXPERIMENT_URL, else the config file's url)"
    top.add_argument("--url", help=url_help)
    # --url is taken after the command too (`autoexperiment status 3 --url ...`); SUPPRESS: a command
    # without it leaves the one given before the command in place.
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help=url_help)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    submit = commands.add_parser("submit", parents=[common], allow_abbrev=False, help="upload a results file (JSONL or zip) and wait for its verdict")
    submit.add_argument("results", metavar="RESULTS")
    submit.add_argument("--no-reexecute", action="store_true", help="score the reported answers only (no verdict to wait for)")
    submit.add_argument("--no-wait", action="store_true", help="print the stored submission and return at once")
    submit.add_argument("--timeout", type=float, default=3600, help="seconds to wait for re-execution (default 3600)")
    submit.add_argument("--interval", type=float, default=3, help="seconds between status checks (default 3)")
    submit.set_defaults(handler=command_submit)

    status = commands.add_parser("status", parents=[common], allow_abbrev=False, help="a submission's status and verdicts")
    status.add_argument("id", type=int, metavar="ID")
    status.add_argument("--json", action="store_true", help="the server's JSON as it is")
    status.set_defaults(handler=command_status)

    download = commands.add_parser("download", help="download a suite's tasks")
    what = download.add_subparsers(dest="what", required=True, metavar="WHAT")
    tasks = what.add_parser("tasks", parents=[common], allow_abbrev=False, help="the tasks of one suite, n and context as a .tar.gz")
    tasks.add_argument("--suite", required=True)
    tasks.add_argument("--n", type=int, required=True, help="functions masked per sample")
    tasks.add_argument("--context", required=True, choices=CONTEXTS)
    tasks.add_argument("--output", default=".", help="directory to save into (default: the current one)")
    tasks.set_defaults(handler=command_download)

    board = commands.add_parser("leaderboard", parents=[common], allow_abbrev=False, help="the leaderboard")
    board.add_argument("--suite", help="only this suite's systems")
    board.add_argument("--format", choices=("table", "json", "csv"), default="table")
    board.set_defaults(handler=command_leaderboard)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_SERVER
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
