import torch
from utils import make_match_reference


def generate_input(m: list, k: int, seed: int):
    return [torch.randn((rows, k), device="cuda").to(torch.float4_e2m1fn_x2) for rows in m]


def ref_kernel(data):
    return torch.cat([torch._scaled_mm(a, a.t(), torch.ones(1), torch.ones(1)) for a in data])


check_implementation = make_match_reference(ref_kernel)
