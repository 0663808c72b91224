import numpy as np

from utils import softmax


class TemperatureScaler:
    """Divide all logits by one scalar temperature fitted on held-out data."""

    def __init__(self, lr, steps):
        self.lr = lr
        self.steps = steps
        self.temperature = 1.0

    def fit(self, logits, labels):
        """Fit the temperature by gradient descent on log T minimising the validation NLL.

        Parameters
        ----------
        logits : ndarray of shape (n, K), float
            Uncalibrated logits of the validation examples.
        labels : ndarray of shape (n,), int
            Validation labels.

        Returns
        -------
        TemperatureScaler
            ``self``, with the fitted ``temperature`` (a float).
        """
        if logits.shape[0] != labels.shape[0]:
            raise ValueError(f"{logits.shape[0]} rows of logits for {labels.shape[0]} labels")
        n = logits.shape[0]
        true_logit = logits[np.arange(n), labels]
        # optimising log T keeps the temperature positive without a constraint; start from T = 1
        log_t = 0.0
        for _ in range(self.steps):
            temperature = np.exp(log_t)
            scaled = logits / temperature
            probs = softmax(scaled)
            expected_logit = np.sum(probs * logits, axis=1)
            # derivative of the mean NLL with respect to log T
            grad = np.mean(true_logit - expected_logit) / temperature
            log_t = log_t - self.lr * grad
        self.temperature = float(np.exp(log_t))
        return self

    def transform(self, logits):
        return logits / self.temperature
