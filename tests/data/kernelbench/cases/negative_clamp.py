import torch
import torch.nn as nn


class Model(nn.Module):
    """A clamp whose lower bound is a negative module constant (not a size)."""

    def __init__(self, low, high):
        super().__init__()
        self.low, self.high = low, high

    def forward(self, x):
        return torch.clamp(x * 3.0, min=self.low, max=self.high)


rows = 32
cols = 48
clamp_min = -1
clamp_max = 1


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [clamp_min, clamp_max]
