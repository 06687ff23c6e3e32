import torch
from utils import make_match_reference


def generate_input(n: int, k: int, seed: int, has_bias: bool, activation: str):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn((n, k), device="cuda", generator=gen)
    w = torch.randn((k, k), device="cuda", generator=gen) / k**0.5
    bias = torch.randn(k, device="cuda", generator=gen) if has_bias else torch.zeros(k, device="cuda")
    return x, w, bias


def ref_kernel(data):
    x, w, bias = data
    y = x @ w + bias
    return torch.relu(y) if y.shape[0] % 2 == 0 else torch.nn.functional.gelu(y)


check_implementation = make_match_reference(ref_kernel, rtol=1e-4, atol=1e-4)
