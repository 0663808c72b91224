"""Gaussian mixture with diagonal covariances, fitted by expectation-maximisation."""
import numpy as np

from utils import logsumexp


def log_gaussian_diag(X, means, variances):
    """Log-density of every point under every diagonal Gaussian, shape (n, k)."""
    d = X.shape[1]
    mahalanobis = np.sum((X[:, None, :] - means[None, :, :]) ** 2 / variances[None, :, :], axis=2)
    log_det = np.sum(np.log(variances), axis=1)
    return -0.5 * (d * np.log(2.0 * np.pi) + log_det[None, :] + mahalanobis)


def e_step(X, weights, means, variances):
    """Responsibilities and the mean log-likelihood per point."""
    log_joint = np.log(weights)[None, :] + log_gaussian_diag(X, means, variances)
    log_norm = logsumexp(log_joint, axis=1)
    responsibilities = np.exp(log_joint - log_norm[:, None])
    return responsibilities, np.mean(log_norm)


def m_step(X, responsibilities):
    """Mixing weights, means and per-dimension variances from responsibilities."""
    counts = responsibilities.sum(axis=0)
    weights = counts / X.shape[0]
    means = responsibilities.T @ X / counts[:, None]
    # variances around the new means
    squared = (X[:, None, :] - means[None, :, :]) ** 2
    variances = np.sum(responsibilities[:, :, None] * squared, axis=0) / counts[:, None]
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
