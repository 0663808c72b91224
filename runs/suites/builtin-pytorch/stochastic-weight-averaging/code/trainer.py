"""SGD training with an optional running average of the weights (SWA)."""
import copy

import torch
import torch.nn.functional as F

from averaging import moving_average
from schedule import learning_rate


def train_epoch(model, optimizer, inputs, labels, batch_size, rng):
    """One epoch of minibatch training on the cross-entropy, in a new random order.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch of inputs to logits; put in training mode.
    optimizer : torch.optim.Optimizer
        Updates the model's parameters at the learning rate already set.
    inputs : Tensor of shape (n, d)
        The training inputs.
    labels : LongTensor of shape (n,)
        The training labels.
    batch_size : int
        The size of the batches; the last batch of the epoch may be smaller.
    rng : numpy.random.Generator
        Draws the epoch's example order with one call ``rng.permutation(n)``.

    Returns
    -------
    float
        The mean over the epoch's examples of the batch losses (before each step), each batch weighted
        by its size.
    """
    model.train()
    n = inputs.shape[0]
    order = torch.from_numpy(rng.permutation(n)).to(inputs.device)
    total = 0.0
    for start in range(0, n, batch_size):
        batch = order[start:start + batch_size]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs[batch]), labels[batch])
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
    return total / n


def fit(model, optimizer, inputs, labels, settings, rng):
    """Train for settings["epochs"] epochs and, when SWA is on, average the weights along the way.

    Parameters
    ----------
    model : torch.nn.Module
        The network; trained in place.
    optimizer : torch.optim.Optimizer
        Over the model's parameters; its learning rate is set at the start of every epoch.
    inputs : Tensor of shape (n, d)
        The training inputs.
    labels : LongTensor of shape (n,)
        The training labels.
    settings : dict
        "epochs", "batch_size", "lr_init", "final_lr_ratio", "swa_start" (0 switches SWA off) and "swa_lr".
    rng : numpy.random.Generator
        Passed to every epoch for its example order.

    Returns
    -------
    tuple (swa_model, n_averaged, train_loss)
        The averaged network (a copy of the model made before training; None without SWA) with the
        number of weight vectors it averages, and the mean training loss of the last epoch.
    """
    epochs, swa_start = settings["epochs"], settings["swa_start"]
    if swa_start:  # 0 switches SWA off
        # the schedule reaches the SWA learning rate before averaging starts and stays there
        budget, lr_final = swa_start, settings["swa_lr"]
        swa_model = copy.deepcopy(model)
    else:
        budget, lr_final = epochs, settings["lr_init"] * settings["final_lr_ratio"]
        swa_model = None
    n_averaged = 0
    for epoch in range(epochs):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(epoch, budget, settings["lr_init"], lr_final)
        train_loss = train_epoch(model, optimizer, inputs, labels, settings["batch_size"], rng)
        if swa_model is not None and epoch + 1 >= swa_start:
            moving_average(swa_model, model, n_averaged)
            n_averaged += 1
    return swa_model, n_averaged, train_loss
