import numpy as np


def sample_rankings(scores, n_samples, temperature, rng):
    """Plackett-Luce rankings via the Gumbel-max trick.

    Returns item indices of shape (n_samples, n_users, n_items), top rank first.
    """
    uniform = rng.random((n_samples,) + scores.shape)
    gumbel = -np.log(-np.log(uniform))
    return np.argsort(-(scores / temperature + gumbel), axis=2)
