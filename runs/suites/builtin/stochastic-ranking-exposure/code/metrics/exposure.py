"""Expected exposure of items under a browsing model, for sampled, ideal and random rankings."""
import numpy as np


def position_weights(n_positions, browsing_model, patience):
    """Examination probability of ranks 1..n_positions under the browsing model.

    Parameters
    ----------
    n_positions : int
        Length of the ranking (every item is ranked).
    browsing_model : {"rbp", "dcg"}
        Rank-biased precision (geometric decay) or the DCG logarithmic discount.
    patience : float
        Probability that an "rbp" user moves on to the next rank; ignored by "dcg".

    Returns
    -------
    ndarray of shape (n_positions,), float
        Weight of every rank, top rank first.
    """
    ranks = np.arange(1, n_positions + 1)
    if browsing_model == "rbp":
        # the user examines rank i with probability patience^(i-1); (1 - patience) normalises
        # the weights of an infinite ranking to sum to one
        decay = patience ** (ranks - 1)
        return (1.0 - patience) * decay
    if browsing_model == "dcg":
        discount = np.log2(ranks + 1)
        return 1.0 / discount
    raise ValueError(f"unknown browsing model {browsing_model!r}")


def expected_exposure(rankings, weights):
    """Monte Carlo estimate of the expected exposure of every (user, item) pair.

    Parameters
    ----------
    rankings : ndarray of shape (n_samples, n_users, n_items), int
        Sampled rankings: ``rankings[s, u, r]`` is the item at rank ``r`` for user ``u`` in sample ``s``.
    weights : ndarray of shape (n_items,), float
        Position weights of the browsing model, top rank first.

    Returns
    -------
    ndarray of shape (n_users, n_items), float
        Mean over the samples of the weight of the rank each item received.
    """
    n_samples, n_users, n_items = rankings.shape
    if weights.shape[0] != n_items:
        raise ValueError(f"{weights.shape[0]} position weights for rankings of {n_items} items")
    exposure = np.zeros((n_users, n_items))
    users = np.arange(n_users)[:, None]
    for ranking in rankings:
        # every row of `ranking` is a permutation, so no item index repeats within a row
        exposure[users, ranking] += weights
    return exposure / n_samples


def target_exposure(grades, weights):
    """Expected exposure under the ideal policy: ranked by grade, ties shuffled uniformly.

    Parameters
    ----------
    grades : ndarray of shape (n_users, n_items), int
        Relevance grade of every (user, item) pair.
    weights : ndarray of shape (n_items,), float
        Position weights of the browsing model, top rank first.

    Returns
    -------
    ndarray of shape (n_users, n_items), float
        Every item gets the mean weight of the block of ranks its tie group occupies.
    """
    n_users, n_items = grades.shape
    if weights.shape[0] != n_items:
        raise ValueError(f"{weights.shape[0]} position weights for {n_items} items")
    target = np.zeros((n_users, n_items))
    for user in range(n_users):
        user_grades = grades[user]
        # grades of the ideal ranking, rank by rank; a tie group occupies a contiguous block
        sorted_grades = np.sort(user_grades)[::-1]
        for grade in np.unique(user_grades):
            # a uniform shuffle within the block gives each of its items the block's mean weight
            block = sorted_grades == grade
            target[user, user_grades == grade] = np.mean(weights[block])
    return target


def random_exposure(shape, weights):
    """Expected exposure under the uniformly random ranking policy: every item gets the mean weight."""
    return np.full(shape, np.mean(weights))
