"""Calibration metrics of top-label confidences, and the Brier score of full probability vectors."""
import numpy as np


def calibration_errors(confidences, correct, n_bins):
    """Expected and maximum calibration error over equal-width confidence bins.

    Parameters
    ----------
    confidences : ndarray of shape (N,), float
        Top-label confidences, each in (0, 1).
    correct : ndarray of shape (N,), float
        1.0 where the prediction is correct and 0.0 otherwise.
    n_bins : int
        Number of equal-width bins on [0, 1).

    Returns
    -------
    ece, mce : float
        Expected calibration error, and the largest gap over the non-empty bins.
    """
    if confidences.shape != correct.shape:
        raise ValueError(f"confidences of shape {confidences.shape} but correct of shape {correct.shape}")
    bins = np.floor(confidences * n_bins).astype(int)
    counts = np.zeros(n_bins)
    gaps = np.zeros(n_bins)
    np.add.at(counts, bins, 1.0)
    # summed (confidence - accuracy) of every bin; divided by the bin size only where needed
    np.add.at(gaps, bins, confidences - correct)
    # weighting each bin's mean gap by its share of the examples leaves the summed gap over N
    ece = np.sum(np.abs(gaps)) / confidences.size
    # empty bins have no mean gap
    occupied = counts > 0
    mean_gaps = np.abs(gaps[occupied]) / counts[occupied]
    mce = np.max(mean_gaps)
    return ece, mce


def adaptive_calibration_error(confidences, correct, n_bins):
    """Calibration error over equal-mass bins of the sorted confidences.

    Parameters
    ----------
    confidences : ndarray of shape (N,), float
        Top-label confidences.
    correct : ndarray of shape (N,), float
        1.0 where the prediction is correct and 0.0 otherwise.
    n_bins : int
        Number of bins; their sizes differ by at most one, the larger ones first.

    Returns
    -------
    float
        The adaptive calibration error (AdaECE).
    """
    if confidences.shape != correct.shape:
        raise ValueError(f"confidences of shape {confidences.shape} but correct of shape {correct.shape}")
    # a stable sort keeps tied confidences in their original order, so the bins are reproducible
    order = np.argsort(confidences, kind="stable")
    # array_split gives the first N mod n_bins chunks one extra element
    confidence_chunks = np.array_split(confidences[order], n_bins)
    correct_chunks = np.array_split(correct[order], n_bins)
    gaps = [np.sum(c) - np.sum(a) for c, a in zip(confidence_chunks, correct_chunks)]
    return np.sum(np.abs(gaps)) / confidences.size


def brier_score(probs, labels):
    """Mean squared distance between probability vectors and one-hot labels.

    Parameters
    ----------
    probs : ndarray of shape (N, K), float
        Predicted class probabilities (rows sum to one).
    labels : ndarray of shape (N,), int
        True classes.

    Returns
    -------
    float
        ``mean_i sum_k (probs[i, k] - onehot[i, k]) ** 2``, between 0 and 2.
    """
    if probs.shape[0] != labels.shape[0]:
        raise ValueError(f"{probs.shape[0]} probability vectors for {labels.shape[0]} labels")
    n_classes = probs.shape[1]
    onehot = np.eye(n_classes)[labels]
    # the full probability vector counts, not only the top label
    squared_distances = np.sum((probs - onehot) ** 2, axis=1)
    return np.mean(squared_distances)
