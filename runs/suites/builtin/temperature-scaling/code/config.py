"""Data, model and calibration settings used throughout the paper."""

DATA = {
    "n_classes": 5,
    "dim": 30,
    # class means are drawn from N(0, separation^2 I)
    "separation": 1.0,
    "n_train": 200,
    "n_val": 1000,
    "n_test": 2000,
    # fraction of training labels replaced by a uniformly random class
    "label_noise": 0.1,
}

MODEL = {
    "lr": 0.5,
    "steps": 1000,
    # L2 penalty on the weights (not on the biases)
    "l2": 0.001,
}

CALIBRATION = {
    "temperature_lr": 0.5,
    "temperature_steps": 100,
    "n_bins": 15,
    # pseudo-count of the Beta prior used by histogram binning
    "prior_strength": 1.0,
}
