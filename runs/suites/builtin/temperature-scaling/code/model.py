"""Multinomial logistic regression trained by full-batch gradient descent."""
import numpy as np

from utils import add_bias_column, log_softmax, one_hot


class SoftmaxRegression:
    def __init__(self, n_features, n_classes):
        self.n_classes = n_classes
        self.W = np.zeros((n_features + 1, n_classes))

    def loss_and_grad(self, W, X, Y):
        n = X.shape[0]
        log_probs = log_softmax(X @ W)
        loss = -np.sum(Y * log_probs) / n
        grad = X.T @ (np.exp(log_probs) - Y) / n
        return loss, grad

    def fit(self, X, y, lr, steps):
        Xb, Y = add_bias_column(X), one_hot(y, self.n_classes)
        for _ in range(steps):
            loss, grad = self.loss_and_grad(self.W, Xb, Y)
            self.W = self.W - lr * grad
        return loss

    def logits(self, X):
        return add_bias_column(X) @ self.W
