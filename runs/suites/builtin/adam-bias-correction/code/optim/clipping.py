import numpy as np


def clip_by_global_norm(grads, max_norm):
    norm = np.sqrt(sum(np.sum(grad ** 2) for grad in grads.values()))
    scale = min(1.0, max_norm / norm)
    clipped = {name: grad * scale for name, grad in grads.items()}
    return clipped, norm
