import numpy as np


def clip_by_global_norm(grads, max_norm):
    norm = np.sqrt(np.sum(grads ** 2))
    scale = min(1.0, max_norm / norm)
    return grads * scale, norm
