import torch
import torch.nn as nn


class Model(nn.Module):
    """A model whose __init__ reads values (a per-layer scale schedule, as a drop-path schedule is made)."""

    def __init__(self, features, layers):
        super().__init__()
        scales = [x.item() for x in torch.linspace(0.5, 1.0, layers)]
        self.linears = nn.ModuleList(nn.Linear(features, features) for _ in scales)
        self.scales = scales

    def forward(self, x):
        for linear, scale in zip(self.linears, self.scales, strict=True):
            x = torch.relu(linear(x)) * scale
        return x


batch = 16
features = 64
layers = 3


def get_inputs():
    return [torch.randn(batch, features)]


def get_init_inputs():
    return [features, layers]
