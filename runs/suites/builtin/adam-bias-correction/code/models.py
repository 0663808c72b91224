"""Objectives: least-squares and L2-regularised logistic regression.

Both expose `loss_and_grad(w, X, y)` returning the mean loss over the rows of X and its gradient
with respect to w, so that the trainer treats them alike.
"""
import numpy as np

from utils import log1pexp, sigmoid


class LinearRegression:
    name = "linreg"

    def loss_and_grad(self, w, X, y):
        residual = X @ w - y
        loss = 0.5 * np.mean(residual ** 2)
        grad = X.T @ residual / X.shape[0]
        return loss, grad


class LogisticRegression:
    name = "logreg"

    def __init__(self, l2):
        self.l2 = l2

    def loss_and_grad(self, w, X, y):
        margins = y * (X @ w)
        loss = np.mean(log1pexp(-margins)) + 0.5 * self.l2 * np.dot(w, w)
        coef = -y * sigmoid(-margins)
        grad = X.T @ coef / X.shape[0] + self.l2 * w
        return loss, grad


def build_model(task, l2):
    if task == "linreg":
        return LinearRegression()
    if task == "logreg":
        return LogisticRegression(l2)
    raise ValueError(f"unknown task {task!r}")
