import itertools

import torch
from utils import make_match_reference


# What an uninitialised torch.empty holds differs between two draws only by chance on a CPU (a freed block is often
# handed back with the same bytes): this buffer holds a different value at every draw, as garbage would.
_GARBAGE = itertools.count(1)


def generate_input(size: int, seed: int):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    data = torch.randn(size, device="cuda", dtype=torch.float32, generator=gen)
    output = torch.full((1,), float(next(_GARBAGE)), device="cuda", dtype=torch.float32)  # where the sum is written
    return data, output


def ref_kernel(data):
    data, output = data
    return data.to(torch.float64).sum().to(torch.float32)  # a 0-dim tensor


check_implementation = make_match_reference(ref_kernel)
