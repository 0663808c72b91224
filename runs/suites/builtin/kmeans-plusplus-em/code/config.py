"""Settings of the synthetic data and of the clustering algorithms (all quoted in the paper)."""

DATA = {
    "n_per_cluster": (150, 100, 200, 120, 130),
    # centres of the generating components (two dimensions)
    "centers": ((0.0, 0.0), (3.0, 0.5), (0.5, 3.5), (4.0, 4.0), (-2.5, 3.0)),
    # per-dimension standard deviations of the generating components
    "stds": ((1.0, 0.6), (0.5, 1.2), (0.9, 0.9), (1.3, 0.7), (0.6, 0.6)),
}

KMEANS = {
    "max_iter": 100,
}

GMM = {
    "n_iter": 25,
}
