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
        """Half mean squared residual of the linear model on (X, y) and its gradient.

        Parameters
        ----------
        params : dict
            ``{"weight": ndarray of shape (d,), "bias": float}``, the current parameters.
        X : ndarray of shape (m, d), float
            The examples (a minibatch or the full training set).
        y : ndarray of shape (m,), float
            Real-valued targets.

        Returns
        -------
        loss : float
            ``0.5 * mean(r ** 2)`` with residuals ``r = X @ weight + bias - y``.
        grads : dict
            Same keys as ``params``: ``X.T @ r / m`` (shape (d,)) and ``mean(r)`` (scalar).
        """
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} targets")
        n_examples = X.shape[0]
        residual = X @ params["weight"] + params["bias"] - y
        loss = 0.5 * np.mean(residual ** 2)
        # the 1/2 in the loss cancels the 2 of the square, so the gradients are plain residual means
        grads = {
            "weight": X.T @ residual / n_examples,
            "bias": np.mean(residual),
        }
        return loss, grads


class LogisticRegression:
    name = "logreg"

    def __init__(self, l2):
        self.l2 = l2

    def loss_and_grad(self, params, X, y):
        """Mean logistic loss plus L2 penalty on the weights (labels in {-1, +1}) and its gradient.

        Parameters
        ----------
        params : dict
            ``{"weight": ndarray of shape (d,), "bias": float}``, the current parameters.
        X : ndarray of shape (m, d), float
            The examples (a minibatch or the full training set).
        y : ndarray of shape (m,), float
            Labels, each -1.0 or +1.0.

        Returns
        -------
        loss : float
            Mean of ``log(1 + exp(-y * (X @ weight + bias)))`` plus ``0.5 * l2 * ||weight||^2``.
        grads : dict
            Same keys as ``params``: the gradient of ``loss`` (shape (d,) and a scalar).
        """
        if not np.all(np.abs(y) == 1.0):
            raise ValueError("logistic regression expects labels in {-1, +1}")
        n_examples = X.shape[0]
        weight = params["weight"]
        margins = y * (X @ weight + params["bias"])
        # the intercept is not regularised
        data_loss = np.mean(log1pexp(-margins))
        penalty = 0.5 * self.l2 * np.dot(weight, weight)
        loss = data_loss + penalty
        # d/dmu log(1 + exp(-mu)) = -sigmoid(-mu); the chain rule through mu = y * z adds the factor y
        coef = -y * sigmoid(-margins) / n_examples
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
