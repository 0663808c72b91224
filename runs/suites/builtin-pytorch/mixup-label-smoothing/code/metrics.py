"""Accuracy, likelihood and calibration of a classifier on held-out data."""
import torch
import torch.nn.functional as F


def evaluate(model, inputs, labels, n_bins):
    """Test metrics of the model's softmax predictions.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch of inputs to logits.
    inputs : Tensor of shape (N, d)
        The test inputs.
    labels : LongTensor of shape (N,)
        The test labels.
    n_bins : int
        B, the number of equal-width confidence bins of the expected calibration error.

    Returns
    -------
    dict
        "accuracy" (fraction of correct top-1 predictions), "nll" (mean negative log-likelihood of the
        true class), "ece" (expected calibration error of the top-label confidence, bin index
        ``ceil(B * confidence) - 1``) and "confidence" (mean top-label confidence); floats.
    """
    model.eval()
    with torch.no_grad():
        log_probs = F.log_softmax(model(inputs), dim=1)
    model.train()
    # binning runs on the CPU: index_add_ on a GPU may add in any order
    log_probs, labels = log_probs.cpu(), labels.cpu()
    top_log_prob, predictions = log_probs.max(dim=1)
    confidences = top_log_prob.exp()
    correct = (predictions == labels).to(confidences.dtype)
    # bin b holds the confidences in (b / B, (b + 1) / B]; a top-label confidence is never 0
    bins = torch.ceil(confidences * n_bins).long() - 1
    gaps = torch.zeros(n_bins, dtype=confidences.dtype).index_add_(0, bins, confidences - correct)
    return {
        "accuracy": correct.mean().item(),
        "nll": -log_probs[torch.arange(labels.shape[0]), labels].mean().item(),
        # each bin's |mean gap| weighted by its share of the examples is its |summed gap| over N
        "ece": (gaps.abs().sum() / labels.shape[0]).item(),
        "confidence": confidences.mean().item(),
    }
