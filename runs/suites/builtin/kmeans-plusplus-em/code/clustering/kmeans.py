"""Lloyd's algorithm with random or k-means++ seeding."""
import numpy as np


def squared_distances(X, centers):
    """Squared Euclidean distances between points (n, d) and centres (k, d), shape (n, k)."""
    return np.sum((X[:, None, :] - centers[None, :, :]) ** 2, axis=2)


def random_init(X, k, rng):
    """k distinct data points chosen uniformly at random."""
    return X[rng.permutation(X.shape[0])[:k]]


def kmeans_plusplus(X, k, rng):
    """Greedy k-means++ seeding: D^2 sampling with 2 + floor(ln k) candidates per centre."""
    n = X.shape[0]
    n_trials = 2 + int(np.log(k))
    centers = X[[rng.integers(n)]]
    closest = np.min(squared_distances(X, centers), axis=1)
    for _ in range(1, k):
        cumulative = np.cumsum(closest)
        candidates = np.searchsorted(cumulative, rng.random(n_trials) * cumulative[-1])
        # greedy step: keep the candidate that lowers the potential the most
        candidate_closest = np.minimum(closest[None, :], squared_distances(X, X[candidates]).T)
        best = np.argmin(np.sum(candidate_closest, axis=1))
        centers = np.vstack([centers, X[candidates[best]]])
        closest = candidate_closest[best]
    return centers


def inertia(X, centers):
    """Sum of squared distances from each point to its nearest centre."""
    return float(np.sum(np.min(squared_distances(X, centers), axis=1)))


def lloyd(X, centers, max_iter):
    """Lloyd iterations until the assignment no longer changes or max_iter is reached.

    Returns the centres, the last assignment and the number of iterations.
    """
    labels = np.argmin(squared_distances(X, centers), axis=1)
    for iteration in range(1, max_iter + 1):
        centers = np.array([X[labels == j].mean(axis=0) for j in range(centers.shape[0])])
        new_labels = np.argmin(squared_distances(X, centers), axis=1)
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
    return centers, new_labels, iteration
