import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns the maximum and its index: two outputs."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor):
        return torch.max(x, dim=self.dim)


batch_size = 16
dim1 = 256
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1)]


def get_init_inputs():
    return [reduce_dim]
