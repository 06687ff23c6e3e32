import torch
from aiter.ops import some_rocm_op  # AMD's aiter: installs only where ROCm is
from utils import make_match_reference


def generate_input(n: int, seed: int):
    return torch.randn(n, device="cuda")


def ref_kernel(data):
    return some_rocm_op(data)


check_implementation = make_match_reference(ref_kernel)
