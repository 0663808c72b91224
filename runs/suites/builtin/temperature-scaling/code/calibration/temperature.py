import numpy as np

from utils import softmax


class TemperatureScaler:
    """Divide all logits by one scalar temperature fitted on held-out data."""

    def __init__(self, lr, steps):
        self.lr = lr
        self.steps = steps
        self.temperature = 1.0

    def fit(self, logits, labels):
        """Fit the temperature by gradient descent on log T minimising the validation NLL."""
        n = logits.shape[0]
        true_logit = logits[np.arange(n), labels]
        log_t = 0.0
        for _ in range(self.steps):
            temperature = np.exp(log_t)
            probs = softmax(logits / temperature)
            expected_logit = np.sum(probs * logits, axis=1)
            # derivative of the mean NLL with respect to log T
            grad = np.mean(true_logit - expected_logit) / temperature
            log_t = log_t - self.lr * grad
        self.temperature = float(np.exp(log_t))
        return self

    def transform(self, logits):
        return logits / self.temperature
