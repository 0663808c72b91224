"""The Wisconsin diagnostic breast cancer data (scikit-learn's copy), read from the paper's data file."""
import os
from pathlib import Path

import numpy as np
import torch

# The sandbox binds the paper's data files read-only at /data.
DATA_DIR = Path(os.environ.get("PAPER_DATA_DIR", "/data"))


def load_splits(file, n_train, seed, **_):
    """Train and test splits of a seeded random permutation, standardised with the training split's statistics."""
    with np.load(DATA_DIR / file) as arrays:
        features, labels = arrays["X"], arrays["y"]
    order = np.random.default_rng(seed).permutation(len(labels))
    features, labels = features[order], labels[order].astype(np.int64)
    mean = features[:n_train].mean(axis=0)
    std = features[:n_train].std(axis=0)
    features = torch.from_numpy((features - mean) / std)
    labels = torch.from_numpy(labels)
    return (features[:n_train], labels[:n_train]), (features[n_train:], labels[n_train:])
