import numpy as np


class SGD:
    """Stochastic gradient descent with heavy-ball or Nesterov momentum."""

    def __init__(self, dim, momentum=0.9, nesterov=False):
        self.momentum = momentum
        self.nesterov = nesterov
        self.velocity = np.zeros(dim)

    def step(self, params, grads, lr):
        self.velocity = self.momentum * self.velocity + grads
        if self.nesterov:
            direction = grads + self.momentum * self.velocity
        else:
            direction = self.velocity
        return params - lr * direction
