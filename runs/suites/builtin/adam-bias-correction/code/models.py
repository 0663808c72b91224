"""Objectives: least-squares and L2-regularised logistic regression with an intercept.

Parameters are a dict {"weight": array of shape (dim,), "bias": float}. Both objectives expose
`loss_and_grad(params, X, y)` returning the mean loss over the rows of X and a dict of gradients
with the same keys as `params`, so that the trainer and the optimisers treat them alike.
"""
import numpy as np

from utils import log1pexp, sigmoid


class LinearRegression:
    name = "linreg"

    def loss_and_grad(self, params, X, y):
        """Half mean squared residual of the linear model on (X, y) and its gradient."""
        residual = X @ params["weight"] + params["bias"] - y
        loss = 0.5 * np.mean(residual ** 2)
        grads = {
            "weight": X.T @ residual / X.shape[0],
            "bias": np.mean(residual),
        }
        return loss, grads


class LogisticRegression:
    name = "logreg"

    def __init__(self, l2):
        self.l2 = l2

    def loss_and_grad(self, params, X, y):
        """Mean logistic loss plus L2 penalty on the weights (labels in {-1, +1}) and its gradient."""
        weight = params["weight"]
        margins = y * (X @ weight + params["bias"])
        # the intercept is not regularised
        loss = np.mean(log1pexp(-margins)) + 0.5 * self.l2 * np.dot(weight, weight)
        coef = -y * sigmoid(-margins) / X.shape[0]
        grads = {
            "weight": X.T @ coef + self.l2 * weight,
            "bias": np.sum(coef),
        }
        return loss, grads


def build_model(task, l2):
    if task == "linreg":
        return LinearRegression()
    if task == "logreg":
        return LogisticRegression(l2)
    raise ValueError(f"unknown task {task!r}")
