import torch


def generate_input(n: int, seed: int):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return torch.randn(n, device="cuda", generator=gen)


def ref_kernel(data):
    return data.abs()


def check_implementation(data, output):
    # a property the reference's own output does not have
    ok = bool((output < 0).all().item())
    return ok, "every element must be negative"
