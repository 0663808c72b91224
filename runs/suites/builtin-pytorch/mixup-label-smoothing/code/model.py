"""A one-hidden-layer perceptron."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, n_inputs, n_hidden, n_classes):
        super().__init__()
        self.hidden = nn.Linear(n_inputs, n_hidden)
        self.output = nn.Linear(n_hidden, n_classes)

    def forward(self, x):
        """Logits of a batch of inputs: a ReLU hidden layer followed by a linear output layer.

        Parameters
        ----------
        x : Tensor of shape (n, n_inputs)
            The inputs.

        Returns
        -------
        Tensor of shape (n, n_classes)
            The logits, ``output(relu(hidden(x)))``.
        """
        hidden = torch.relu(self.hidden(x))
        return self.output(hidden)
