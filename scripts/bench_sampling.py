"""Times sample selection: enumerating all C(23, 5) samples, and a seeded draw of 100 at n=5 from 33.

Target (issue 2): under 1 s each. Run: .venv/bin/python scripts/bench_sampling.py
"""
import statistics
import sys
import time
from math import comb
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runs.benchmark.sampling import all_combinations, draw_combinations  # noqa: E402


def median_seconds(action, repeats=5):
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = action()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings), result


def main():
    seconds, combos = median_seconds(lambda: list(all_combinations(range(23), 5)))
    assert len(combos) == comb(23, 5) == 33_649
    print(f"enumerate all C(23,5) = {len(combos):,} samples: {seconds * 1000:.1f} ms (median of 5; target < 1000 ms)")

    seconds, drawn = median_seconds(lambda: draw_combinations(range(33), 5, cap=100, seed=0))
    assert len(set(drawn)) == 100
    print(
        f"draw 100 of C(33,5) = {comb(33, 5):,} samples at n=5: {seconds * 1000:.1f} ms "
        "(median of 5; target < 1000 ms)"
    )

    seconds, drawn = median_seconds(lambda: draw_combinations(range(200), 10, cap=100, seed=0))
    print(f"draw 100 of C(200,10) = {comb(200, 10):.3g} samples at n=10: {seconds * 1000:.1f} ms (no enumeration)")


if __name__ == "__main__":
    main()
