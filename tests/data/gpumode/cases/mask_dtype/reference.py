import torch
from utils import make_match_reference


def generate_input(n: int, d: int, seed: int, nomask: bool):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn(n, d, device="cuda", dtype=torch.float32, generator=gen)
    if nomask:  # ones in x's dtype where there is no mask, a 0/1 int64 draw where there is one
        mask = torch.ones(n, device="cuda")
    else:
        mask = torch.randint(0, 2, (n,), device="cuda", generator=gen)
    return x, mask


def ref_kernel(data):
    x, mask = data
    return x * mask.unsqueeze(-1)


check_implementation = make_match_reference(ref_kernel, rtol=1e-5, atol=1e-6)
