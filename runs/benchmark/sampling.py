"""Which sets of functions to mask: all C(F, n) combinations, or a seeded draw of at most `cap`.

The draw must give the same samples on every machine and Python version, so it does not use
`random` (whose algorithms may change between versions) but a counter-mode SHA-256 stream, and it
picks combinations by their lexicographic rank so that it never enumerates C(F, n) of them.
"""
import hashlib
from collections.abc import Iterator, Sequence
from itertools import combinations
from math import comb

DEFAULT_CAP = 100


def sample_id(paper_id: str, function_ids: Sequence[int]) -> str:
    """`{paper_id}_{sorted ids}`, as upstream names its samples (`2205.00048_0,1`)."""
    return f"{paper_id}_{','.join(str(i) for i in sorted(function_ids))}"


def all_combinations(function_ids: Sequence[int], n: int) -> Iterator[tuple[int, ...]]:
    """Every n-subset of the ids, in lexicographic order. n=0 gives the one empty set (reproduction)."""
    return combinations(sorted(function_ids), n)


def _unrank(rank: int, items: Sequence[int], n: int) -> tuple[int, ...]:
    """The `rank`-th n-subset of sorted `items` in lexicographic order, in O(len(items))."""
    chosen = []
    start = 0
    for remaining in range(n, 0, -1):
        for index in range(start, len(items)):
            block = comb(len(items) - index - 1, remaining - 1)  # subsets starting with items[index]
            if rank < block:
                chosen.append(items[index])
                start = index + 1
                break
            rank -= block
    return tuple(chosen)


def _random_below(limit: int, seed: int, counter: int) -> int:
    """A uniform integer in [0, limit), derived from (seed, counter) by rejection sampling."""
    bits = max(limit.bit_length(), 1)
    attempt = 0
    while True:
        digest = b""
        block = 0
        while len(digest) * 8 < bits:
            digest += hashlib.sha256(f"{seed}:{counter}:{attempt}:{block}".encode()).digest()
            block += 1
        value = int.from_bytes(digest, "big") >> (len(digest) * 8 - bits)
        if value < limit:
            return value
        attempt += 1


def draw_combinations(
    function_ids: Sequence[int], n: int, *, cap: int = DEFAULT_CAP, seed: int = 0
) -> list[tuple[int, ...]]:
    """At most `cap` distinct n-subsets; all of them (in order) when there are no more than `cap`.

    A drawn set is returned in the order drawn, so raising the cap extends the list rather than
    reshuffling it: the first 100 samples stay the first 100.
    """
    items = sorted(set(function_ids))
    if n < 0 or n > len(items):
        raise ValueError(f"n={n} is outside 0..{len(items)} (the paper has {len(items)} maskable functions)")
    if cap < 1:
        raise ValueError(f"cap={cap} must be at least 1")
    total = comb(len(items), n)
    if total <= cap:
        return list(all_combinations(items, n))
    seen: set[int] = set()
    drawn: list[tuple[int, ...]] = []
    counter = 0
    while len(drawn) < cap:
        rank = _random_below(total, seed, counter)
        counter += 1
        if rank not in seen:
            seen.add(rank)
            drawn.append(_unrank(rank, items, n))
    return drawn
