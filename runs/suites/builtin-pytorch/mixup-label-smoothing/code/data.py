"""The 8x8 handwritten digits (scikit-learn's copy of the UCI test set), read from the paper's data file."""
import os
from pathlib import Path

import numpy as np
import torch

# The sandbox binds the paper's data files read-only at /data.
DATA_DIR = Path(os.environ.get("PAPER_DATA_DIR", "/data"))


def load_splits(file, n_train, max_intensity, seed, **_):
    """Train and test splits of a seeded random permutation of the images, pixels scaled to [0, 1]."""
    with np.load(DATA_DIR / file) as arrays:
        images, labels = arrays["X"], arrays["y"]
    order = np.random.default_rng(seed).permutation(len(labels))
    features = torch.from_numpy(images[order] / max_intensity)
    targets = torch.from_numpy(labels[order].astype(np.int64))
    return (features[:n_train], targets[:n_train]), (features[n_train:], targets[n_train:])
