import numpy as np


def log_softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def softmax(logits):
    return np.exp(log_softmax(logits))


def add_bias_column(X):
    return np.hstack([X, np.ones((X.shape[0], 1))])


def one_hot(labels, n_classes):
    return np.eye(n_classes)[labels]


def negative_log_likelihood(logits, labels):
    return float(-np.mean(log_softmax(logits)[np.arange(labels.size), labels]))


def top_label(probs, labels):
    """Confidence of the predicted class and whether the prediction is correct (as 0.0/1.0)."""
    predictions = probs.argmax(axis=1)
    return probs.max(axis=1), (predictions == labels).astype(float)
