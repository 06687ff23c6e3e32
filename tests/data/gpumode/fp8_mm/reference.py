import torch
from task import input_t, output_t
from utils import make_match_reference

BLOCK = 128


def generate_input(m: int, n: int, k: int, seed: int) -> input_t:
    """
    Random FP8 operands with float32 block scales, as (a, b, a_scale, b_scale, c):
      a: [m, k] float8_e4m3fnuz, column-major
      b: [n, k] float8_e4m3fnuz, column-major
      a_scale: [m, k // 128] float32, column-major
      b_scale: [ceil(n / 128), k // 128] float32, column-major
      c: [m, n] bfloat16, row-major (the output buffer)
    """
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    scale_n = (n + BLOCK - 1) // BLOCK
    scale_k = (k + BLOCK - 1) // BLOCK
    a = torch.randn((k, m), dtype=torch.bfloat16, device="cuda", generator=gen).to(torch.float8_e4m3fnuz)
    b = torch.randn((k, n), dtype=torch.bfloat16, device="cuda", generator=gen).to(torch.float8_e4m3fnuz)
    a_scale = torch.randn((scale_k, m), dtype=torch.float32, device="cuda", generator=gen)
    b_scale = torch.randn((scale_k, scale_n), dtype=torch.float32, device="cuda", generator=gen)
    c = torch.zeros((m, n), dtype=torch.bfloat16, device="cuda")
    return (a.T, b.T, a_scale.T, b_scale.T, c)


def ref_kernel(data: input_t) -> output_t:
    """
    Dequantise both operands block by block in float32, multiply, round to bf16 into c.
    """
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    a_full = a_scale.repeat_interleave(BLOCK, dim=1)[:, :k]
    b_full = b_scale.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:n, :k]
    a32 = a.to(torch.float32) * a_full
    b32 = b.to(torch.float32) * b_full
    c[...] = (a32 @ b32.T).to(torch.bfloat16)
    return c


check_implementation = make_match_reference(ref_kernel, rtol=2e-02, atol=1e-03)
