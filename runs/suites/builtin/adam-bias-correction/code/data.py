"""Synthetic ill-conditioned regression and classification problems."""
import numpy as np


def feature_scales(dim, condition_number):
    """Standard deviations of the features, log-spaced so that the covariance has the given condition."""
    return np.logspace(0.0, -0.5 * np.log10(condition_number), dim)


def make_features(n_samples, dim, condition_number, rng):
    return rng.standard_normal((n_samples, dim)) * feature_scales(dim, condition_number)


def make_regression(n_samples, dim, condition_number, noise_std, intercept, rng):
    """Linear targets y = X w* + intercept + noise with standard normal w*."""
    X = make_features(n_samples, dim, condition_number, rng)
    w_true = rng.standard_normal(dim)
    y = X @ w_true + intercept + noise_std * rng.standard_normal(n_samples)
    return X, y, w_true


def make_classification(n_samples, dim, condition_number, logit_scale, intercept, rng):
    """Labels in {-1, +1} drawn from a logistic model with logits logit_scale * (X w*) + intercept."""
    X = make_features(n_samples, dim, condition_number, rng)
    w_true = rng.standard_normal(dim)
    logits = logit_scale * (X @ w_true) + intercept
    prob_positive = 1.0 / (1.0 + np.exp(-logits))
    y = np.where(rng.random(n_samples) < prob_positive, 1.0, -1.0)
    return X, y, w_true
