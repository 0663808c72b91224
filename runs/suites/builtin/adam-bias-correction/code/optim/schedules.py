import numpy as np


def warmup_cosine_lr(step, total_steps, base_lr, warmup_steps, final_lr_ratio):
    """Learning rate of update `step` (0-based): linear warm-up times cosine decay to a floor.

    Parameters
    ----------
    step : int
        Index of the update about to be made, 0 for the first one.
    total_steps : int
        Total number of updates of the run.
    base_lr : float
        Peak learning rate.
    warmup_steps : int
        Number of steps over which the warm-up factor grows linearly from 0 to 1.
    final_lr_ratio : float
        Floor of the cosine factor, as a fraction of ``base_lr``.

    Returns
    -------
    float
        The learning rate of this step.
    """
    # zero at the very first step, one from step `warmup_steps` on
    warmup = min(1.0, step / warmup_steps)
    # the cosine runs over the whole run and is not restarted after the warm-up
    cosine = 0.5 * (1.0 + np.cos(np.pi * step / total_steps))
    decay = final_lr_ratio + (1.0 - final_lr_ratio) * cosine
    return base_lr * warmup * decay
