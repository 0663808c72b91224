"""Numerically stable elementwise helpers."""
import numpy as np


def sigmoid(z):
    """1 / (1 + exp(-z)) without overflow for large |z|."""
    out = np.empty_like(z, dtype=float)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def log1pexp(z):
    """log(1 + exp(z)) without overflow for large z."""
    return np.logaddexp(0.0, z)
