class SGD:
    """Stochastic gradient descent with heavy-ball or Nesterov momentum.

    `step` takes and returns a dict of parameters; the velocity of each parameter is kept by name.
    """

    def __init__(self, momentum=0.9, nesterov=False):
        self.momentum = momentum
        self.nesterov = nesterov
        self.velocity = {}

    def step(self, params, grads, lr):
        """One momentum update of every parameter; returns the new parameters.

        Parameters
        ----------
        params : dict of str to ndarray or float
            Current value of every parameter.
        grads : dict of str to ndarray or float
            Gradient of every parameter, with the same keys and shapes as ``params``.
        lr : float
            Learning rate of this step.

        Returns
        -------
        dict of str to ndarray or float
            Updated parameters; ``self.velocity`` is updated in place.
        """
        if set(grads) != set(params):
            raise ValueError(f"gradients for {sorted(grads)} but parameters {sorted(params)}")
        new_params = {}
        for name, value in params.items():
            grad = grads[name]
            # the velocity accumulates raw gradients (no (1 - momentum) damping); it starts at zero
            velocity = self.momentum * self.velocity.get(name, 0.0) + grad
            self.velocity[name] = velocity
            if self.nesterov:
                # look ahead: step along the gradient plus the momentum-scaled new velocity
                direction = grad + self.momentum * velocity
            else:
                direction = velocity
            new_params[name] = value - lr * direction
        return new_params
