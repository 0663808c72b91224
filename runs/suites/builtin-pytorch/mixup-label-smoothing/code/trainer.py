"""Minibatch training with soft targets (label smoothing and mixup)."""
import math

import torch

from schedule import learning_rate
from targets import mixup, smooth_labels, soft_cross_entropy


def train(model, optimizer, inputs, labels, n_classes, settings, rng):
    """Train the model in place for settings["epochs"] epochs and return the last epoch's mean loss.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch of inputs to logits.
    optimizer : torch.optim.Optimizer
        Updates the model's parameters; its learning rate is overwritten before every step.
    inputs : Tensor of shape (n, d)
        The training inputs.
    labels : LongTensor of shape (n,)
        The training labels.
    n_classes : int
        K, the number of classes.
    settings : dict
        "epochs", "batch_size", "lr" (the peak learning rate), "warmup_steps", "smoothing" (epsilon)
        and "mixup_alpha" (0 switches mixup off).
    rng : numpy.random.Generator
        Draws every epoch's example order (``rng.permutation(n)``), then the mixup draws of its batches.

    Returns
    -------
    float
        The mean over the last epoch's examples of the training loss against the (smoothed, mixed)
        targets, each batch weighted by its size.
    """
    n = inputs.shape[0]
    batch_size = settings["batch_size"]
    total_steps = settings["epochs"] * math.ceil(n / batch_size)
    step = 0
    for _ in range(settings["epochs"]):
        order = torch.from_numpy(rng.permutation(n)).to(inputs.device)
        epoch_loss = 0.0
        for start in range(0, n, batch_size):
            # the last batch of an epoch may be smaller
            batch = order[start:start + batch_size]
            batch_inputs = inputs[batch]
            batch_targets = smooth_labels(labels[batch], n_classes, settings["smoothing"])
            if settings["mixup_alpha"] > 0:
                batch_inputs, batch_targets, _ = mixup(batch_inputs, batch_targets, settings["mixup_alpha"], rng)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, total_steps, settings["lr"], settings["warmup_steps"])
            optimizer.zero_grad()
            loss = soft_cross_entropy(model(batch_inputs), batch_targets)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item() * len(batch)
            step += 1
    return epoch_loss / n
