import numpy as np


def clip_by_global_norm(grads, max_norm):
    """Rescale all gradients jointly to a global norm of at most max_norm.

    Returns the clipped gradients and the global norm before clipping.
    """
    norm = np.sqrt(sum(np.sum(grad ** 2) for grad in grads.values()))
    scale = min(1.0, max_norm / norm)
    clipped = {name: grad * scale for name, grad in grads.items()}
    return clipped, norm
