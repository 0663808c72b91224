"""Gaussian class-conditional data with a noisy training set."""
import numpy as np


def make_splits(n_classes, dim, separation, n_train, n_val, n_test, label_noise, rng):
    means = separation * rng.standard_normal((n_classes, dim))

    def draw(n):
        labels = rng.integers(0, n_classes, size=n)
        features = means[labels] + rng.standard_normal((n, dim))
        return features, labels

    X_train, y_train = draw(n_train)
    flip = rng.random(n_train) < label_noise
    y_train = np.where(flip, rng.integers(0, n_classes, size=n_train), y_train)
    return (X_train, y_train), draw(n_val), draw(n_test)
