"""Calibration metrics."""
import numpy as np


def expected_calibration_error(confidences, correct, n_bins):
    bins = np.floor(confidences * n_bins).astype(int)
    gaps = np.zeros(n_bins)
    np.add.at(gaps, bins, confidences - correct)
    return np.sum(np.abs(gaps)) / confidences.shape[0]


def adaptive_calibration_error(confidences, correct, n_bins):
    order = np.argsort(confidences, kind="stable")
    gaps = [np.sum(c) - np.sum(a) for c, a in zip(np.array_split(confidences[order], n_bins),
                                                   np.array_split(correct[order], n_bins))]
    return np.sum(np.abs(gaps)) / confidences.shape[0]


def brier_score(probs, labels):
    onehot = np.eye(probs.shape[1])[labels]
    return np.mean(np.sum((probs - onehot) ** 2, axis=1))
