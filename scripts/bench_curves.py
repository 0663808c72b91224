"""Times the difficulty-curve fit (leaderboard.curves.curve_fit, 400 bootstrap resamples) that the
leaderboard's refresh runs twice per system (once per counting rule), on synthetic systems of growing
size: 5 n, each with `samples` samples of 1 to 5 attempts. Its cost depends on the distinct (c, m) per n,
not on the samples, so a large system costs what a small one does; a system whose attempts were all
re-executed has the same samples under both rules and is fitted once (memoised), so "both rules" below is
the worst case.

Prints, per size, the median time of one fit and what the fits add to a refresh of 1,000 such systems.
Run: .venv/bin/python scripts/bench_curves.py [--repeats 20]
"""
import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from leaderboard.curves import _curve_fit, curve_fit  # noqa: E402


def system(samples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    shares = {}
    for n in range(1, 6):
        attempts = rng.integers(1, 6, size=samples)
        passes = rng.binomial(attempts, 1 / (1 + np.exp(-(3.0 - n))))
        shares[n] = [(int(c), int(m), times) for (c, m), times in Counter(zip(passes, attempts)).items()]
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    for samples in (10, 100, 1_000, 10_000):
        shares = system(samples, seed=samples)
        timings = []
        for _ in range(args.repeats):
            _curve_fit.cache_clear()  # a refresh meets each system's samples once per counting rule
            start = time.perf_counter()
            fit = curve_fit(shares)
            timings.append(time.perf_counter() - start)
        median = statistics.median(timings)
        print(f"curve fit, 5 n x {samples:,} samples ({fit.status}): {median * 1000:.2f} ms "
              f"(median of {args.repeats}); 1,000 systems, both rules: {median * 2000:.1f} s")


if __name__ == "__main__":
    main()
