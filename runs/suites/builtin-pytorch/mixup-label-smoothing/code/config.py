"""Data, model and training settings used throughout the paper."""

DATA = {
    "file": "digits.npz",
    "n_classes": 10,
    # the rest of the 1797 images form the test split
    "n_train": 1000,
    # pixel intensities are integers from 0 to 16
    "max_intensity": 16.0,
}

MODEL = {
    "hidden": 128,
}

TRAINING = {
    "epochs": 30,
    "batch_size": 50,
    "lr": 0.1,
    "warmup_steps": 40,
    "momentum": 0.9,
    "weight_decay": 5e-4,
    # 0 switches label smoothing off
    "smoothing": 0.0,
    # 0 switches mixup off
    "mixup_alpha": 0.0,
}

EVALUATION = {
    "n_bins": 10,
}
