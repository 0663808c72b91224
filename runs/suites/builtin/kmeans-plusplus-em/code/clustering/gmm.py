"""Gaussian mixture with diagonal covariances, fitted by expectation-maximisation."""
import numpy as np

from utils import logsumexp


def log_gaussian_diag(X, means, variances):
    """Log-density of every point under every diagonal Gaussian, shape (n, k).

    Parameters
    ----------
    X : ndarray of shape (n, d), float
        The points.
    means : ndarray of shape (k, d), float
        Mean of every component.
    variances : ndarray of shape (k, d), float
        Per-dimension variance of every component (the diagonal of its covariance).

    Returns
    -------
    ndarray of shape (n, k), float
        Entry ``[i, j]`` is ``log N(X[i] | means[j], diag(variances[j]))``.
    """
    if means.shape != variances.shape:
        raise ValueError(f"means have shape {means.shape} but variances have shape {variances.shape}")
    d = X.shape[1]
    differences = X[:, None, :] - means[None, :, :]
    mahalanobis = np.sum(differences ** 2 / variances[None, :, :], axis=2)
    # the determinant of a diagonal covariance is the product of its variances
    log_det = np.sum(np.log(variances), axis=1)
    log_normaliser = d * np.log(2.0 * np.pi)
    return -0.5 * (log_normaliser + log_det[None, :] + mahalanobis)


def e_step(X, weights, means, variances):
    """Responsibilities and the mean log-likelihood per point.

    Parameters
    ----------
    X : ndarray of shape (n, d), float
        The points.
    weights : ndarray of shape (k,), float
        Mixing weights (summing to one).
    means, variances : ndarray of shape (k, d), float
        Means and per-dimension variances of the components.

    Returns
    -------
    responsibilities : ndarray of shape (n, k), float
        Posterior probability of every component for every point (rows sum to one).
    mean_log_likelihood : float
        ``mean_i log sum_j weights[j] N(X[i] | component j)``.
    """
    if weights.shape[0] != means.shape[0]:
        raise ValueError(f"{weights.shape[0]} mixing weights for {means.shape[0]} components")
    log_weights = np.log(weights)
    log_joint = log_weights[None, :] + log_gaussian_diag(X, means, variances)
    # normalise in log space: densities of far-away components underflow
    log_norm = logsumexp(log_joint, axis=1)
    responsibilities = np.exp(log_joint - log_norm[:, None])
    mean_log_likelihood = np.mean(log_norm)
    return responsibilities, mean_log_likelihood


def m_step(X, responsibilities):
    """Mixing weights, means and per-dimension variances from responsibilities.

    Parameters
    ----------
    X : ndarray of shape (n, d), float
        The points.
    responsibilities : ndarray of shape (n, k), float
        Soft assignment of every point to every component (rows sum to one); a one-hot matrix
        gives the statistics of a hard clustering.

    Returns
    -------
    weights : ndarray of shape (k,), float
        Mixing weights.
    means, variances : ndarray of shape (k, d), float
        Responsibility-weighted means and per-dimension variances (maximum likelihood, no prior).
    """
    if responsibilities.shape[0] != X.shape[0]:
        raise ValueError(f"{responsibilities.shape[0]} rows of responsibilities for {X.shape[0]} points")
    n = X.shape[0]
    # effective number of points of every component
    counts = responsibilities.sum(axis=0)
    weights = counts / n
    means = responsibilities.T @ X / counts[:, None]
    # variances around the new means
    squared = (X[:, None, :] - means[None, :, :]) ** 2
    weighted_squares = responsibilities[:, :, None] * squared
    variances = np.sum(weighted_squares, axis=0) / counts[:, None]
    return weights, means, variances


def fit_gmm(X, responsibilities, n_iter):
    """Start from the given responsibilities (an M-step first) and run n_iter EM iterations.

    Returns the parameters, the final responsibilities and the mean log-likelihood per point
    of the data under the parameters of each iteration (before its M-step).
    """
    history = []
    weights, means, variances = m_step(X, responsibilities)
    for _ in range(n_iter):
        responsibilities, mean_log_likelihood = e_step(X, weights, means, variances)
        history.append(float(mean_log_likelihood))
        weights, means, variances = m_step(X, responsibilities)
    return (weights, means, variances), responsibilities, history
