import torch


def generate_input(n: int, seed: int):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    a = torch.randn((n, n), device="cuda", generator=gen)
    return a @ a.T + n * torch.eye(n, device="cuda")


def ref_kernel(data):
    return torch.linalg.cholesky(data)


def check_implementation(data, output):
    # a property of the output, not closeness to ref_kernel's
    residual = (output @ output.T - data).abs().max().item()
    return (residual < 1e-3, f"residual {residual}")
