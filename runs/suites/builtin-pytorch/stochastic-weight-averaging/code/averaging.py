"""The running average of weights along the SGD trajectory, and the batch-norm statistics it needs."""
import torch
from torch import nn


def moving_average(average_model, model, n_averaged):
    """Fold the model's current parameters into the running average held by average_model.

    Parameters
    ----------
    average_model : torch.nn.Module
        Holds the average of the n_averaged weight vectors seen so far; updated in place.
    model : torch.nn.Module
        The network being trained (same architecture).
    n_averaged : int
        How many weight vectors the average already holds (0 makes it a copy of model's).

    Returns
    -------
    None
        Every parameter becomes ``average + (current - average) / (n_averaged + 1)``; buffers (the
        batch-norm statistics) are not touched.
    """
    with torch.no_grad():
        for average, current in zip(average_model.parameters(), model.parameters()):
            average += (current - average) / (n_averaged + 1)


def update_bn(model, inputs, batch_size):
    """Recompute every batch-norm layer's running statistics for the model's weights in one pass.

    Parameters
    ----------
    model : torch.nn.Module
        A network with torch.nn.BatchNorm1d layers; its running means and variances are replaced.
    inputs : Tensor of shape (n, d)
        The training inputs, taken in order in consecutive batches of batch_size (the last may be smaller).
    batch_size : int
        The size of the batches.

    Returns
    -------
    None
        Each running mean (variance) becomes the average of the batches' means (unbiased variances),
        each batch weighted by its size; the layers' momenta and the model's mode are restored.
    """
    norms = [module for module in model.modules() if isinstance(module, nn.BatchNorm1d)]
    momenta = {norm: norm.momentum for norm in norms}
    for norm in norms:
        norm.reset_running_stats()
    was_training = model.training
    model.train()
    seen = 0
    with torch.no_grad():
        for start in range(0, inputs.shape[0], batch_size):
            batch = inputs[start:start + batch_size]
            # new = (1 - m) * old + m * batch with m = b / (seen + b): the size-weighted mean of the batches
            momentum = batch.shape[0] / (seen + batch.shape[0])
            for norm in norms:
                norm.momentum = momentum
            model(batch)
            seen += batch.shape[0]
    for norm in norms:
        norm.momentum = momenta[norm]
    model.train(was_training)
