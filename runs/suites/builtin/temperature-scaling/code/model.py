"""Multinomial logistic regression trained by full-batch gradient descent.

The weight matrix W has one row per feature plus a last row holding the class biases; inputs are
augmented with a constant 1 column accordingly.
"""
import numpy as np

from utils import add_bias_column, log_softmax, one_hot


class SoftmaxRegression:
    def __init__(self, n_features, n_classes, l2):
        self.n_classes = n_classes
        self.l2 = l2
        self.W = np.zeros((n_features + 1, n_classes))

    def loss_and_grad(self, W, X, Y):
        """Mean cross-entropy plus L2 penalty (bias row excluded) and its gradient with respect to W."""
        n = X.shape[0]
        log_probs = log_softmax(X @ W)
        penalised = W.copy()
        penalised[-1] = 0.0  # biases are not regularised
        loss = -np.sum(Y * log_probs) / n + 0.5 * self.l2 * np.sum(penalised ** 2)
        grad = X.T @ (np.exp(log_probs) - Y) / n + self.l2 * penalised
        return loss, grad

    def fit(self, X, y, lr, steps):
        Xb, Y = add_bias_column(X), one_hot(y, self.n_classes)
        for _ in range(steps):
            _, grad = self.loss_and_grad(self.W, Xb, Y)
            self.W = self.W - lr * grad
        loss, _ = self.loss_and_grad(self.W, Xb, Y)
        return loss

    def logits(self, X):
        return add_bias_column(X) @ self.W
