import numpy as np


class HistogramBinning:
    """Replace the top-label confidence by the smoothed accuracy of its confidence bin."""

    def __init__(self, n_bins, prior_strength):
        self.n_bins = n_bins
        self.prior_strength = prior_strength
        self.bin_accuracy = None

    def fit(self, confidences, correct):
        """Estimate the accuracy of every equal-width confidence bin, smoothed towards its midpoint.

        Parameters
        ----------
        confidences : ndarray of shape (n,), float
            Top-label confidences of the validation examples, each in (0, 1).
        correct : ndarray of shape (n,), float
            1.0 where the prediction is correct and 0.0 otherwise.

        Returns
        -------
        HistogramBinning
            ``self``, with ``bin_accuracy`` of shape (n_bins,).
        """
        if confidences.shape != correct.shape:
            raise ValueError(f"confidences of shape {confidences.shape} but correct of shape {correct.shape}")
        # bin b covers [b / n_bins, (b + 1) / n_bins)
        bins = np.floor(confidences * self.n_bins).astype(int)
        hits = np.zeros(self.n_bins)
        totals = np.zeros(self.n_bins)
        # unbuffered: repeated bin indices accumulate instead of overwriting each other
        np.add.at(hits, bins, correct)
        np.add.at(totals, bins, 1.0)
        centers = (np.arange(self.n_bins) + 0.5) / self.n_bins
        # Beta prior centred on the midpoint: defined for empty bins, shrinks sparse ones
        prior_hits = self.prior_strength * centers
        self.bin_accuracy = (hits + prior_hits) / (totals + self.prior_strength)
        return self

    def predict(self, confidences):
        """Replace every confidence by the estimated accuracy of its bin.

        Parameters
        ----------
        confidences : ndarray of shape (n,), float
            Uncalibrated top-label confidences, each in (0, 1).

        Returns
        -------
        ndarray of shape (n,), float
            Calibrated confidences; the predicted classes are unchanged.
        """
        if self.bin_accuracy is None:
            raise ValueError("HistogramBinning.predict called before fit")
        # the same equal-width binning as in fit
        bins = np.floor(confidences * self.n_bins).astype(int)
        return self.bin_accuracy[bins]
