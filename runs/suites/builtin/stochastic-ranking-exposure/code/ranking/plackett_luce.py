import numpy as np


def sample_rankings(scores, n_samples, temperature, rng):
    """Plackett-Luce rankings via the Gumbel-max trick.

    Parameters
    ----------
    scores : ndarray of shape (n_users, n_items), float
        Score of every (user, item) pair.
    n_samples : int
        Number of rankings drawn per user.
    temperature : float
        Softmax temperature: item probabilities are proportional to ``exp(score / temperature)``.
    rng : numpy.random.Generator
        Source of the Gumbel noise.

    Returns
    -------
    ndarray of shape (n_samples, n_users, n_items), int
        Item indices, top rank first.
    """
    if scores.ndim != 2:
        raise ValueError(f"scores must be a (users, items) matrix, got shape {scores.shape}")
    uniform = rng.random((n_samples,) + scores.shape)
    gumbel = -np.log(-np.log(uniform))
    # sorting Gumbel-perturbed log-weights draws a whole Plackett-Luce ranking at once
    perturbed = scores / temperature + gumbel
    # argsort is ascending: negate to put the largest perturbed score first
    return np.argsort(-perturbed, axis=2)
