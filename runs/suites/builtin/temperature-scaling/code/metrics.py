"""Calibration metrics of top-label confidences, and the Brier score of full probability vectors."""
import numpy as np


def calibration_errors(confidences, correct, n_bins):
    """Expected and maximum calibration error over equal-width confidence bins."""
    bins = np.floor(confidences * n_bins).astype(int)
    counts = np.zeros(n_bins)
    gaps = np.zeros(n_bins)
    np.add.at(counts, bins, 1.0)
    np.add.at(gaps, bins, confidences - correct)
    # weighting each bin's mean gap by its share of the examples leaves the summed gap over N
    ece = np.sum(np.abs(gaps)) / confidences.size
    occupied = counts > 0
    mce = np.max(np.abs(gaps[occupied]) / counts[occupied])
    return ece, mce


def adaptive_calibration_error(confidences, correct, n_bins):
    """Calibration error over equal-mass bins of the sorted confidences."""
    order = np.argsort(confidences, kind="stable")
    gaps = [np.sum(c) - np.sum(a) for c, a in zip(np.array_split(confidences[order], n_bins),
                                                   np.array_split(correct[order], n_bins))]
    return np.sum(np.abs(gaps)) / confidences.size


def brier_score(probs, labels):
    """Mean squared distance between probability vectors and one-hot labels."""
    onehot = np.eye(probs.shape[1])[labels]
    return np.mean(np.sum((probs - onehot) ** 2, axis=1))
