import torch
import torch.nn as nn


class Model(nn.Module):
    """The FFT of each row: a complex output."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.fft(x, dim=-1)


batch_size = 16
n = 1024


def get_inputs():
    return [torch.randn(batch_size, n)]


def get_init_inputs():
    return []
