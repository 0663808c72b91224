"""A one-hidden-layer perceptron with batch normalisation."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, n_inputs, n_hidden, n_classes):
        super().__init__()
        self.hidden = nn.Linear(n_inputs, n_hidden)
        self.norm = nn.BatchNorm1d(n_hidden)
        self.output = nn.Linear(n_hidden, n_classes)

    def forward(self, x):
        """Logits of a batch: linear layer, batch normalisation, ReLU, linear output layer.

        Parameters
        ----------
        x : Tensor of shape (n, n_inputs)
            The inputs.

        Returns
        -------
        Tensor of shape (n, n_classes)
            The logits, ``output(relu(norm(hidden(x))))``.
        """
        # normalised before the non-linearity, as in the networks SWA was proposed for
        return self.output(torch.relu(self.norm(self.hidden(x))))
