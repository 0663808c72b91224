class SGD:
    """Stochastic gradient descent with heavy-ball or Nesterov momentum.

    `step` takes and returns a dict of parameters; the velocity of each parameter is kept by name.
    """

    def __init__(self, momentum=0.9, nesterov=False):
        self.momentum = momentum
        self.nesterov = nesterov
        self.velocity = {}

    def step(self, params, grads, lr):
        """One momentum update of every parameter; returns the new parameters."""
        new_params = {}
        for name, value in params.items():
            velocity = self.momentum * self.velocity.get(name, 0.0) + grads[name]
            self.velocity[name] = velocity
            if self.nesterov:
                direction = grads[name] + self.momentum * velocity
            else:
                direction = velocity
            new_params[name] = value - lr * direction
        return new_params
