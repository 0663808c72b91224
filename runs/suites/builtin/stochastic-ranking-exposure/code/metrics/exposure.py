"""Expected exposure of items under a browsing model (rank-biased precision)."""
import numpy as np


def position_weights(n_positions, browsing_model, patience):
    ranks = np.arange(1, n_positions + 1)
    if browsing_model == "rbp":
        return (1.0 - patience) * patience ** (ranks - 1)
    if browsing_model == "dcg":
        return 1.0 / np.log2(ranks + 1)
    raise ValueError(f"unknown browsing model {browsing_model!r}")


def expected_exposure(rankings, weights):
    n_samples, n_users, n_items = rankings.shape
    exposure = np.zeros((n_users, n_items))
    users = np.arange(n_users)[:, None]
    for ranking in rankings:
        exposure[users, ranking] += weights
    return exposure / n_samples


def target_exposure(grades, weights):
    n_users, n_items = grades.shape
    target = np.zeros((n_users, n_items))
    for user in range(n_users):
        sorted_grades = np.sort(grades[user])[::-1]
        for grade in np.unique(grades[user]):
            target[user, grades[user] == grade] = np.mean(weights[sorted_grades == grade])
    return target


def random_exposure(shape, weights):
    """Expected exposure under the uniformly random ranking policy: every item gets the mean weight."""
    return np.full(shape, np.mean(weights))
