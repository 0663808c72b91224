import numpy as np


def clip_by_global_norm(grads, max_norm):
    """Rescale all gradients jointly to a global norm of at most max_norm.

    Parameters
    ----------
    grads : dict of str to ndarray or float
        Gradient of every parameter.
    max_norm : float
        Clipping threshold on the global norm.

    Returns
    -------
    clipped : dict of str to ndarray or float
        The rescaled gradients, with the keys of ``grads``.
    norm : float
        Euclidean norm of all gradient entries taken together, before clipping.
    """
    squared_norm = sum(np.sum(grad ** 2) for grad in grads.values())
    norm = np.sqrt(squared_norm)
    # one common factor for all parameters keeps the direction of the full gradient
    scale = min(1.0, max_norm / norm)
    clipped = {name: grad * scale for name, grad in grads.items()}
    return clipped, norm
