import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Performs a standard 2D convolution with a square input and a square kernel (stride 1, no padding, bias).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


batch_size = 8
in_channels = 3
out_channels = 64
kernel_size = 3
width = 128
height = 128


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
