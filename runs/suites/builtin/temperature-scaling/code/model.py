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
        """Mean cross-entropy plus L2 penalty (bias row excluded) and its gradient with respect to W.

        Parameters
        ----------
        W : ndarray of shape (d + 1, K), float
            Weights, the last row holding the class biases.
        X : ndarray of shape (n, d + 1), float
            Inputs augmented with a constant 1 column.
        Y : ndarray of shape (n, K), float
            One-hot labels.

        Returns
        -------
        loss : float
            The regularised training objective.
        grad : ndarray of shape (d + 1, K), float
            Its gradient, ``X.T @ (P - Y) / n + l2 * W`` with the bias row of ``W`` zeroed.
        """
        if X.shape[1] != W.shape[0]:
            raise ValueError(f"X has {X.shape[1]} columns but W has {W.shape[0]} rows (bias column missing?)")
        n = X.shape[0]
        log_probs = log_softmax(X @ W)
        probs = np.exp(log_probs)
        penalised = W.copy()
        penalised[-1] = 0.0  # biases are not regularised
        data_loss = -np.sum(Y * log_probs) / n
        penalty = 0.5 * self.l2 * np.sum(penalised ** 2)
        loss = data_loss + penalty
        # softmax and cross-entropy together have the simple gradient P - Y with respect to the logits
        grad = X.T @ (probs - Y) / n + self.l2 * penalised
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
