import numpy as np


class HistogramBinning:
    """Replace the top-label confidence by the smoothed accuracy of its confidence bin."""

    def __init__(self, n_bins, prior_strength):
        self.n_bins = n_bins
        self.prior_strength = prior_strength
        self.bin_accuracy = None

    def fit(self, confidences, correct):
        """Estimate the accuracy of every equal-width confidence bin, smoothed towards its midpoint."""
        bins = np.floor(confidences * self.n_bins).astype(int)
        hits = np.zeros(self.n_bins)
        totals = np.zeros(self.n_bins)
        np.add.at(hits, bins, correct)
        np.add.at(totals, bins, 1.0)
        centers = (np.arange(self.n_bins) + 0.5) / self.n_bins
        self.bin_accuracy = (hits + self.prior_strength * centers) / (totals + self.prior_strength)
        return self

    def predict(self, confidences):
        """Replace every confidence by the estimated accuracy of its bin."""
        bins = np.floor(confidences * self.n_bins).astype(int)
        return self.bin_accuracy[bins]
