"""Data, model and training settings used throughout the paper."""

DATA = {
    "file": "breast_cancer.npz",
    "n_classes": 2,
    # the rest of the 569 tumours form the test split
    "n_train": 300,
}

MODEL = {
    "hidden": 64,
}

TRAINING = {
    "epochs": 40,
    "batch_size": 32,
    "lr_init": 0.2,
    "momentum": 0.9,
    "weight_decay": 5e-4,
    # plain SGD decays the learning rate to this fraction of lr_init
    "final_lr_ratio": 0.01,
}

SWA = {
    # averaging starts after this many epochs; 0 switches SWA off
    "start": 20,
    "lr": 0.1,
    "bn_batch_size": 64,
}
