import time

import torch
import torch.nn as nn


class Model(nn.Module):
    """A forward that is slow on the importing machine (it sleeps: a stand-in for a large real run)."""

    def forward(self, x):
        time.sleep(0.3)
        return torch.tanh(x)


batch = 64
dim = 256


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return []
