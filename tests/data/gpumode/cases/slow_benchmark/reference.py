import time

import torch
from utils import make_match_reference


def generate_input(size: int, seed: int):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    if size > 1000:  # stands for a draw too slow to probe on the importing machine
        time.sleep(float(size) / 1000)
    return torch.randn(size, device="cuda", generator=gen)


def ref_kernel(data):
    return torch.cumsum(data, dim=0)


check_implementation = make_match_reference(ref_kernel, rtol=1e-4, atol=1e-4)
