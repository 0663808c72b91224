from collections import Counter
from itertools import combinations
from math import comb

import pytest

from runs.benchmark.sampling import all_combinations, draw_combinations, sample_id


def test_sample_id_sorts_ids():
    assert sample_id("2205.00048", [4, 0, 1]) == "2205.00048_0,1,4"
    assert sample_id("adam-bias", []) == "adam-bias_"  # n=0: reproduction


def test_all_combinations_enumerates_in_lexicographic_order():
    assert list(all_combinations([2, 0, 1], 2)) == [(0, 1), (0, 2), (1, 2)]
    assert list(all_combinations(range(5), 0)) == [()]


def test_draw_returns_everything_when_under_the_cap():
    assert draw_combinations(range(7), 2, cap=100) == list(combinations(range(7), 2))


def test_draw_is_seeded_distinct_sorted_and_within_range():
    first = draw_combinations(range(33), 5, cap=100, seed=7)
    assert first == draw_combinations(range(33), 5, cap=100, seed=7)
    assert first != draw_combinations(range(33), 5, cap=100, seed=8)
    assert len(set(first)) == 100
    assert all(list(ids) == sorted(set(ids)) and len(ids) == 5 and set(ids) <= set(range(33)) for ids in first)


def test_draw_is_the_same_on_every_machine():
    # The stream is SHA-256 based, not `random`, so these values may never change; if this fails,
    # previously published sample sets would no longer be reproducible.
    assert draw_combinations(range(33), 5, cap=3, seed=1) == [(4, 6, 14, 18, 24), (0, 3, 25, 30, 32), (6, 9, 13, 23, 28)]


def test_raising_the_cap_extends_the_draw_without_reshuffling():
    assert draw_combinations(range(20), 3, cap=100, seed=3)[:40] == draw_combinations(range(20), 3, cap=40, seed=3)


def test_draw_does_not_enumerate_huge_spaces():
    drawn = draw_combinations(range(500), 50, cap=100, seed=0)  # C(500, 50) ~ 2e69
    assert len(set(drawn)) == 100


def test_draw_is_roughly_uniform():
    counts = Counter(ids for seed in range(400) for ids in draw_combinations(range(6), 2, cap=5, seed=seed))
    # 400 draws of 5 from C(6,2)=15 subsets: each expected 133; a biased unranking would skew this badly.
    assert set(counts) == set(combinations(range(6), 2))
    assert min(counts.values()) > 90 and max(counts.values()) < 180


@pytest.mark.parametrize(("n", "cap"), [(-1, 10), (8, 10), (2, 0)])
def test_draw_rejects_impossible_requests(n, cap):
    with pytest.raises(ValueError):
        draw_combinations(range(7), n, cap=cap)


def test_n_zero_is_one_empty_sample():
    assert draw_combinations(range(7), 0) == [()]
    assert comb(7, 0) == 1
