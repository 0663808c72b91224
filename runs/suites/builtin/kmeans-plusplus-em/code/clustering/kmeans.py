"""Lloyd's algorithm with random or k-means++ seeding."""
import numpy as np


def squared_distances(X, centers):
    """Squared Euclidean distances between points (n, d) and centres (k, d), shape (n, k).

    Parameters
    ----------
    X : ndarray of shape (n, d), float
        The points.
    centers : ndarray of shape (k, d), float
        The centres.

    Returns
    -------
    ndarray of shape (n, k), float
        Entry ``[i, j]`` is ``||X[i] - centers[j]||^2``.
    """
    if X.shape[1] != centers.shape[1]:
        raise ValueError(f"points have {X.shape[1]} dimensions but centres have {centers.shape[1]}")
    # broadcast to (n, k, d) differences: no cancellation error, unlike |x|^2 - 2 x.c + |c|^2
    differences = X[:, None, :] - centers[None, :, :]
    return np.sum(differences ** 2, axis=2)


def random_init(X, k, rng):
    """k distinct data points chosen uniformly at random."""
    return X[rng.permutation(X.shape[0])[:k]]


def kmeans_plusplus(X, k, rng):
    """Greedy k-means++ seeding: D^2 sampling with 2 + floor(ln k) candidates per centre.

    Parameters
    ----------
    X : ndarray of shape (n, d), float
        The points; every centre is one of them.
    k : int
        Number of centres to choose.
    rng : numpy.random.Generator
        Source of randomness (first centre, then the candidates of every further centre).

    Returns
    -------
    ndarray of shape (k, d), float
        The chosen centres, in the order they were picked.
    """
    n = X.shape[0]
    # the number of candidates used by the greedy variant of Arthur & Vassilvitskii
    n_trials = 2 + int(np.log(k))
    centers = X[[rng.integers(n)]]
    # squared distance of every point to its closest centre so far (the D^2 weights)
    closest = np.min(squared_distances(X, centers), axis=1)
    for _ in range(1, k):
        # inverse-CDF sampling of candidates with probability proportional to D^2
        cumulative = np.cumsum(closest)
        thresholds = rng.random(n_trials) * cumulative[-1]
        candidates = np.searchsorted(cumulative, thresholds)
        # greedy step: keep the candidate that lowers the potential the most
        candidate_closest = np.minimum(closest[None, :], squared_distances(X, X[candidates]).T)
        potentials = np.sum(candidate_closest, axis=1)
        best = np.argmin(potentials)
        centers = np.vstack([centers, X[candidates[best]]])
        closest = candidate_closest[best]
    return centers


def inertia(X, centers):
    """Sum of squared distances from each point to its nearest centre."""
    return float(np.sum(np.min(squared_distances(X, centers), axis=1)))


def lloyd(X, centers, max_iter):
    """Lloyd iterations until the assignment no longer changes or max_iter is reached.

    Parameters
    ----------
    X : ndarray of shape (n, d), float
        The points.
    centers : ndarray of shape (k, d), float
        Initial centres (the seeding).
    max_iter : int
        Maximum number of iterations (centre update followed by reassignment).

    Returns
    -------
    centers : ndarray of shape (k, d), float
        The final centres.
    labels : ndarray of shape (n,), int
        Index of the closest final centre of every point.
    n_iter : int
        Number of iterations run, including the one whose assignment did not change.
    """
    if centers.shape[1] != X.shape[1]:
        raise ValueError(f"centres have {centers.shape[1]} dimensions but points have {X.shape[1]}")
    n_clusters = centers.shape[0]
    labels = np.argmin(squared_distances(X, centers), axis=1)
    for iteration in range(1, max_iter + 1):
        # update step: every centre moves to the mean of the points assigned to it
        centers = np.array([X[labels == j].mean(axis=0) for j in range(n_clusters)])
        # assignment step
        new_labels = np.argmin(squared_distances(X, centers), axis=1)
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
    return centers, new_labels, iteration
