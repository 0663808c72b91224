import numpy as np


class Adam:
    """Adam with an optional AMSGrad maximum and optional decoupled (AdamW) weight decay.

    `step` takes and returns a dict of parameters; moment estimates are kept by parameter name.
    Weight decay, when enabled, applies to every parameter except the bias.
    """

    def __init__(self, beta1=0.9, beta2=0.999, eps=1e-8, amsgrad=False, weight_decay=0.0):
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps
        self.amsgrad = amsgrad
        self.weight_decay = weight_decay
        self.m = {}
        self.v = {}
        self.v_max = {}
        self.t = 0

    def update_moments(self, name, grad):
        """Update the moving averages of one parameter and return their bias-corrected values.

        Parameters
        ----------
        name : str
            Name of the parameter; the running averages are stored under it in ``self.m`` and ``self.v``.
        grad : ndarray or float
            Gradient of that parameter at the current step.

        Returns
        -------
        m_hat, v_hat : ndarray or float
            Bias-corrected first and second moment estimates, with the shape of ``grad``.
        """
        if self.t == 0:
            raise ValueError("the step counter is still 0: step() must increment self.t before the moments")
        m = self.beta1 * self.m.get(name, 0.0) + (1 - self.beta1) * grad
        v = self.beta2 * self.v.get(name, 0.0) + (1 - self.beta2) * grad ** 2
        self.m[name] = m
        self.v[name] = v
        # both averages start at zero: divide out the weight their terms sum to after t steps
        m_correction = 1 - self.beta1 ** self.t
        v_correction = 1 - self.beta2 ** self.t
        m_hat = m / m_correction
        v_hat = v / v_correction
        return m_hat, v_hat

    def step(self, params, grads, lr):
        """One Adam / AMSGrad / AdamW update of every parameter; returns the new parameters.

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
            Updated parameters; the moment estimates and ``self.t`` are updated in place.
        """
        if set(grads) != set(params):
            raise ValueError(f"gradients for {sorted(grads)} but parameters {sorted(params)}")
        # one counter shared by all parameters, so the first step uses t = 1
        self.t += 1
        new_params = {}
        for name, value in params.items():
            m_hat, v_hat = self.update_moments(name, grads[name])
            if self.amsgrad:
                # running maximum of the bias-corrected estimate keeps the per-coordinate step non-increasing
                v_hat = np.maximum(self.v_max.get(name, v_hat), v_hat)
                self.v_max[name] = v_hat
            # eps outside the square root
            denominator = np.sqrt(v_hat) + self.eps
            update = m_hat / denominator
            # decoupled weight decay acts on the parameter itself, not through the adaptive denominator
            if name != "bias":
                update = update + self.weight_decay * value
            new_params[name] = value - lr * update
        return new_params
