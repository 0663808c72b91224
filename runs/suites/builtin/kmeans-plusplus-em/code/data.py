"""Axis-aligned Gaussian blobs with unequal sizes and spreads."""
import numpy as np


def make_blobs(n_per_cluster, centers, stds, rng):
    parts, labels = [], []
    for label, (n, center, std) in enumerate(zip(n_per_cluster, centers, stds)):
        parts.append(np.asarray(center) + np.asarray(std) * rng.standard_normal((n, len(center))))
        labels.append(np.full(n, label))
    X, y = np.vstack(parts), np.concatenate(labels)
    order = rng.permutation(len(y))
    return X[order], y[order]
