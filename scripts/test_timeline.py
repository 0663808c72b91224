"""Where a parallel test run spent its time, from the file TEST_TIMELINE names (tests/conftest.py
appends one line per test): each worker's busy time and its last end, the slowest tests, and the
slowest files by the sum of their tests. The run lasts as long as its busiest worker, so a file that
one worker spends most of the run on is the one to split or shorten.

    TEST_TIMELINE=/tmp/timeline.jsonl make test
    .venv/bin/python scripts/test_timeline.py /tmp/timeline.jsonl
"""
import argparse
import collections
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.timeline)]
    start = min(row["start"] for row in rows)
    by_worker = collections.defaultdict(list)
    for row in rows:
        by_worker[row["worker"]].append(row)
    print(f"{len(rows)} tests, {max(row['end'] for row in rows) - start:.0f} s from the first start to the last end")
    for worker, tests in sorted(by_worker.items()):
        busy = sum(test["end"] - test["start"] for test in tests)
        last = max(test["end"] for test in tests) - start
        print(f"  {worker}: {len(tests)} tests, busy {busy:.0f} s, last end at {last:.0f} s")
    print(f"\nslowest {args.top} tests (worker, seconds, start offset):")
    for row in sorted(rows, key=lambda row: row["start"] - row["end"])[: args.top]:
        print(f"  {row['worker']:>4} {row['end'] - row['start']:7.1f} s  @{row['start'] - start:6.0f}  {row['test']}")
    files = collections.Counter()
    for row in rows:
        files[row["test"].split("::")[0]] += row["end"] - row["start"]
    print(f"\nslowest {args.top} files (sum of their tests):")
    for name, seconds in files.most_common(args.top):
        print(f"  {seconds:7.1f} s  {name}")


if __name__ == "__main__":
    main()
