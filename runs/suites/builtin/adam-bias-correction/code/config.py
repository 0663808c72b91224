"""Default hyperparameters for the experiments in the paper.

Every value here is quoted in the paper's set-up section; the command-line flags of `train.py`
override the most common ones.
"""

DATA = {
    "n_samples": 512,
    "dim": 20,
    # ratio between the largest and the smallest eigenvalue of the feature covariance
    "condition_number": 400.0,
    "noise_std": 0.5,
    # logistic task: scale of the true logits before labels are drawn
    "logit_scale": 3.0,
    # true intercept of both tasks (added to the targets, respectively to the true logits)
    "intercept": 1.0,
}

MODEL = {
    "logreg_l2": 0.05,
}

OPTIMIZERS = {
    "momentum": {"momentum": 0.9, "nesterov": False},
    "nesterov": {"momentum": 0.9, "nesterov": True},
    "adam": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "amsgrad": False},
    "amsgrad": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "amsgrad": True},
    "adamw": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "amsgrad": False},
}

TRAIN = {
    "batch_size": 32,
    "steps": 300,
    "lr": 0.01,
    "schedule": "constant",
    "warmup_steps": 30,
    "final_lr_ratio": 0.1,
    "weight_decay": 0.0,
    "clip": None,
    # full-data losses are reported after these numbers of steps (and after the last step)
    "checkpoints": (10, 100),
    # every weight starts at this value
    "init_value": 1.0,
}
