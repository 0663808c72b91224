"""Expected exposure of items under a browsing model, for sampled, ideal and random rankings."""
import numpy as np


def position_weights(n_positions, browsing_model, patience):
    """Examination probability of ranks 1..n_positions under the browsing model."""
    ranks = np.arange(1, n_positions + 1)
    if browsing_model == "rbp":
        return (1.0 - patience) * patience ** (ranks - 1)
    if browsing_model == "dcg":
        return 1.0 / np.log2(ranks + 1)
    raise ValueError(f"unknown browsing model {browsing_model!r}")


def expected_exposure(rankings, weights):
    """Monte Carlo estimate of the expected exposure of every (user, item) pair."""
    n_samples, n_users, n_items = rankings.shape
    exposure = np.zeros((n_users, n_items))
    users = np.arange(n_users)[:, None]
    for ranking in rankings:
        # every row of `ranking` is a permutation, so no item index repeats within a row
        exposure[users, ranking] += weights
    return exposure / n_samples


def target_exposure(grades, weights):
    """Expected exposure under the ideal policy: ranked by grade, ties shuffled uniformly."""
    n_users, n_items = grades.shape
    target = np.zeros((n_users, n_items))
    for user in range(n_users):
        # grades of the ideal ranking, rank by rank; a tie group occupies a contiguous block
        sorted_grades = np.sort(grades[user])[::-1]
        for grade in np.unique(grades[user]):
            target[user, grades[user] == grade] = np.mean(weights[sorted_grades == grade])
    return target


def random_exposure(shape, weights):
    """Expected exposure under the uniformly random ranking policy: every item gets the mean weight."""
    return np.full(shape, np.mean(weights))
