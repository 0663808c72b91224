import math


def learning_rate(step, total_steps, base_lr, warmup_steps):
    """Learning rate of an optimisation step: linear warm-up, then cosine decay to zero.

    Parameters
    ----------
    step : int
        The step's index, from 0 to total_steps - 1.
    total_steps : int
        The number of steps of the whole run.
    base_lr : float
        The peak learning rate, reached at the end of the warm-up.
    warmup_steps : int
        The length of the warm-up.

    Returns
    -------
    float
        ``base_lr * (step + 1) / warmup_steps`` during the warm-up, then
        ``base_lr * (1 + cos(pi * (step - warmup_steps) / (total_steps - warmup_steps))) / 2``.
    """
    if step < warmup_steps:
        # step 0 already takes a small step instead of none
        return base_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))
