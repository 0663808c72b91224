"""Soft training targets: label smoothing, mixup, and the cross-entropy against a target distribution."""
import torch
import torch.nn.functional as F


def smooth_labels(labels, n_classes, epsilon):
    """One-hot targets with a fraction epsilon of the mass spread uniformly over all classes.

    Parameters
    ----------
    labels : LongTensor of shape (n,)
        The classes.
    n_classes : int
        K, the number of classes.
    epsilon : float
        The smoothing strength; 0 gives plain one-hot targets.

    Returns
    -------
    Tensor of shape (n, K)
        ``(1 - epsilon) * one_hot + epsilon / K``; every row sums to one.
    """
    one_hot = F.one_hot(labels, n_classes).to(torch.get_default_dtype())
    # the uniform part includes the true class, which keeps 1 - epsilon + epsilon / K
    return (1.0 - epsilon) * one_hot + epsilon / n_classes


def soft_cross_entropy(logits, targets):
    """Mean cross-entropy between target distributions and the softmax of the logits.

    Parameters
    ----------
    logits : Tensor of shape (n, K)
        The model's logits.
    targets : Tensor of shape (n, K)
        Target distributions (rows sum to one).

    Returns
    -------
    Tensor of shape ()
        ``mean_i (-sum_k targets[i, k] * log_softmax(logits)[i, k])``.
    """
    log_probs = F.log_softmax(logits, dim=1)
    return -(targets * log_probs).sum(dim=1).mean()


def mixup(inputs, targets, alpha, rng):
    """Convex combinations of a batch with a shuffled copy of itself, with one Beta-distributed weight.

    Parameters
    ----------
    inputs : Tensor of shape (n, d)
        The batch's inputs.
    targets : Tensor of shape (n, K)
        Their target distributions.
    alpha : float
        The Beta(alpha, alpha) parameter; must be positive.
    rng : numpy.random.Generator
        Draws the weight first (``rng.beta(alpha, alpha)``), then the partner order
        (``rng.permutation(n)``).

    Returns
    -------
    tuple (mixed_inputs, mixed_targets, lam)
        ``lam * inputs + (1 - lam) * inputs[perm]``, the same mix of the targets, and lam (a float).
    """
    lam = float(rng.beta(alpha, alpha))
    partners = torch.from_numpy(rng.permutation(inputs.shape[0])).to(inputs.device)
    mixed_inputs = lam * inputs + (1.0 - lam) * inputs[partners]
    mixed_targets = lam * targets + (1.0 - lam) * targets[partners]
    return mixed_inputs, mixed_targets, lam
