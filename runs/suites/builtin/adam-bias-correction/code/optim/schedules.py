import numpy as np


def warmup_cosine_lr(step, total_steps, base_lr, warmup_steps, final_lr_ratio):
    """Learning rate of update `step` (0-based): linear warm-up times cosine decay to a floor."""
    warmup = min(1.0, step / warmup_steps)
    cosine = 0.5 * (1.0 + np.cos(np.pi * step / total_steps))
    decay = final_lr_ratio + (1.0 - final_lr_ratio) * cosine
    return base_lr * warmup * decay
