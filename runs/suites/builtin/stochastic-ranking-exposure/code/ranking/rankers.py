"""Scoring functions of the rankers under evaluation. A ranker maps the collection to a score
for every (user, item) pair; the stochastic policy then samples rankings from these scores."""
import numpy as np


def oracle_scores(grades):
    """The true relevance grades themselves."""
    return grades.astype(float)


def noisy_oracle_scores(grades, noise_std, rng):
    """Grades corrupted by independent Gaussian noise (one draw per user-item pair)."""
    return grades + noise_std * rng.standard_normal(grades.shape)


def popularity_scores(grades):
    """Non-personalised scores: the fraction of users who find each item relevant.

    Parameters
    ----------
    grades : ndarray of shape (n_users, n_items), int
        Relevance grade of every (user, item) pair; a grade above zero counts as relevant.

    Returns
    -------
    ndarray of shape (n_users, n_items), float
        The same row of item popularities for every user.
    """
    if grades.ndim != 2:
        raise ValueError(f"grades must be a (users, items) matrix, got shape {grades.shape}")
    n_users = grades.shape[0]
    relevant = grades > 0
    popularity = np.sum(relevant, axis=0) / n_users
    return np.tile(popularity, (n_users, 1))


def build_scores(name, grades, noise_std, rng):
    if name == "oracle":
        return oracle_scores(grades)
    if name == "noisy":
        return noisy_oracle_scores(grades, noise_std, rng)
    if name == "popularity":
        return popularity_scores(grades)
    raise ValueError(f"unknown ranker {name!r}")
