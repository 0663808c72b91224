import numpy as np


class Adam:
    """Adam with optional AMSGrad maximum and decoupled (AdamW) weight decay."""

    def __init__(self, dim, beta1=0.9, beta2=0.999, eps=1e-8, amsgrad=False, weight_decay=0.0):
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps
        self.amsgrad = amsgrad
        self.weight_decay = weight_decay
        self.m = np.zeros(dim)
        self.v = np.zeros(dim)
        self.v_max = np.zeros(dim)
        self.t = 0

    def update_moments(self, grads):
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grads
        self.v = self.beta2 * self.v + (1 - self.beta2) * grads ** 2
        m_hat = self.m / (1 - self.beta1 ** self.t)
        v_hat = self.v / (1 - self.beta2 ** self.t)
        return m_hat, v_hat

    def step(self, params, grads, lr):
        m_hat, v_hat = self.update_moments(grads)
        if self.amsgrad:
            self.v_max = np.maximum(self.v_max, v_hat)
            v_hat = self.v_max
        update = m_hat / (np.sqrt(v_hat) + self.eps)
        return params - lr * (update + self.weight_decay * params)
