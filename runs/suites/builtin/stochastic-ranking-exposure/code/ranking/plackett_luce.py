import numpy as np


def sample_rankings(scores, n_samples, temperature, rng):
    uniform = rng.random((n_samples,) + scores.shape)
    gumbel = -np.log(-np.log(uniform))
    return np.argsort(-(scores / temperature + gumbel), axis=2)
