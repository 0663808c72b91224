import torch
import torch.nn.functional as F


def evaluate(model, inputs, labels):
    """Test negative log-likelihood and accuracy of the model's softmax predictions.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch of inputs to logits; evaluated in eval mode (batch norm uses its running
        statistics), without gradients, and left in the mode it was in.
    inputs : Tensor of shape (N, d)
        The test inputs.
    labels : LongTensor of shape (N,)
        The test labels.

    Returns
    -------
    dict
        "nll" (mean of ``-log p[i, y_i]`` from a log-softmax) and "accuracy" (fraction of examples whose
        largest logit is the true class's); floats.
    """
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(inputs)
    model.train(was_training)
    return {
        "nll": F.cross_entropy(logits, labels).item(),
        "accuracy": (logits.argmax(dim=1) == labels).double().mean().item(),
    }
