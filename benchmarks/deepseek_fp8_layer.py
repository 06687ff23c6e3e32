"""A DeepSeek-V3-style FP8 MLP, timed with an exported op (`ksci export` of fp8_gemm_kmajor) and with the vendor
library, at 1 to 8192 tokens. Usage, on a GPU, with the exported package installed (or on PYTHONPATH):

    python benchmarks/deepseek_fp8_layer.py [--package ksci_fp8_gemm_kmajor] [--reps 30]

The layer (Fp8Linear) quantises as DeepSeek-V3's inference does and as the problem defines: activations per 1x128
group (one float32 scale per token and 128 channels), weights per 128x128 block; it computes C = (A*sa)(B*sb)^T in
float32 and stores bf16, either with the exported op or with cuBLASLt's block-scaled FP8 GEMM through
torch._scaled_mm (the problem's vendor baseline, kernels/fp8_gemm_kmajor/reference.py `vendor`).

Shapes: one MoE expert of DeepSeek-V3 (hidden 7168, expert intermediate 2048): gate and up fused as one 7168 ->
4096 projection, SiLU(gate) * up, then down 2048 -> 7168. Why the expert and not the dense MLP (intermediate 18432):
58 of the model's 61 layers are MoE layers, an expert sees anywhere from one token to thousands, and its shapes lie
inside the op's shape contract (N and K up to 16384; 7168 x 2048 is one of the problem's benchmark shapes), while
18432 lies outside it (the op refuses what the evaluation's contract does not hold).

Outside the contract the layer pads or splits, and the table says so: fewer tokens than the contract's smallest M,
or a count that is not a multiple of its alignment, are padded with zero rows (the padded rows are computed and
dropped); more than its largest M are split into chunks of at most that many rows. The vendor path gets the tokens
as they are. Printed per token count: the layer's time with each path (CUDA events, the median of --reps calls, the
L2 cache flushed before each), the vendor's time over the op's (above 1: the op's layer is faster), and the relative
L2 difference of the two paths' outputs.
"""

from __future__ import annotations

import argparse
import importlib
import statistics

import torch
from torch import nn

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK = 128
HIDDEN, EXPERT_INTERMEDIATE = 7168, 2048
TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


def quantise_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (T x K, bf16) per 1x128 group: FP8 T x K row-major, scales T x K/128 column-major (the problem's layout).
    The scale is amax / 448, at least 1e-4 / 448 (an all-zero group, padding, then quantises to zeros)."""
    t, k = x.shape
    groups = x.float().view(t, k // BLOCK, BLOCK)
    scale = groups.abs().amax(dim=2).clamp(min=1e-4) / FP8_MAX
    q = (groups / scale.unsqueeze(2)).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(t, k)
    return q, scale.T.contiguous().T


def quantise_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w (N x K, float) per 128x128 block: FP8 N x K row-major, scales ceil(N/128) x K/128 column-major."""
    n, k = w.shape
    nb = -(-n // BLOCK)
    padded = torch.zeros((nb * BLOCK, k), dtype=torch.float32, device=w.device)
    padded[:n] = w
    blocks = padded.view(nb, BLOCK, k // BLOCK, BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / FP8_MAX
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(nb * BLOCK, k)[:n]
    return q.contiguous(), scale.T.contiguous().T


class Fp8Linear(nn.Module):
    """y = x W^T with W quantised per 128x128 block at construction and x per 1x128 group at each call."""

    def __init__(self, weight: torch.Tensor, path: str, op=None, contract: dict | None = None) -> None:
        super().__init__()
        self.weight, self.weight_scale = quantise_weight(weight)
        self.path, self.op, self.contract = path, op, contract or {}
        # cuBLASLt's scale of B: (K/128, N/128) with strides (1, K/128), as reference.vendor hands it over.
        self.vendor_scale = self.weight_scale.contiguous().T
        self.notes: set[str] = set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, a_scale = quantise_activations(x)
        if self.path == "vendor":
            return self._vendor(x, a, a_scale)
        return self._with_op(x, a, a_scale)

    def _vendor(self, x: torch.Tensor, a: torch.Tensor, a_scale: torch.Tensor) -> torch.Tensor:
        """cuBLASLt on the tokens as they are; where it refuses the count, on them padded to a multiple of 16."""
        try:
            return torch._scaled_mm(a, self.weight.T, a_scale, self.vendor_scale, out_dtype=torch.bfloat16)
        except (RuntimeError, ValueError):
            t = x.shape[0]
            rows = -(-t // 16) * 16
            if rows == t:
                raise
            self.notes.add(f"vendor padded to {rows}")
            padded = torch.zeros((rows, x.shape[1]), dtype=x.dtype, device=x.device)
            padded[:t] = x
            a, a_scale = quantise_activations(padded)
            return torch._scaled_mm(a, self.weight.T, a_scale, self.vendor_scale, out_dtype=torch.bfloat16)[:t]

    def _with_op(self, x: torch.Tensor, a: torch.Tensor, a_scale: torch.Tensor) -> torch.Tensor:
        rule = self.contract["m"]
        t = x.shape[0]
        if t > rule["maximum"]:
            self.notes.add(f"split into chunks of {rule['maximum']}")
            return torch.cat([self._with_op(c, *quantise_activations(c)) for c in x.split(rule["maximum"])])
        rows = max(rule["minimum"], -(-t // rule["multiple"]) * rule["multiple"])
        if rows != t:
            self.notes.add(f"padded to {rows}")
            padded = torch.zeros((rows, x.shape[1]), dtype=x.dtype, device=x.device)
            padded[:t] = x
            a, a_scale = quantise_activations(padded)
        return self.op(a, self.weight, a_scale, self.weight_scale)[:t]


class ExpertMlp(nn.Module):
    """One DeepSeek-V3 MoE expert: down(SiLU(gate(x)) * up(x)), gate and up as one fused projection."""

    def __init__(self, gate_up: torch.Tensor, down: torch.Tensor, path: str, op=None, contract=None) -> None:
        super().__init__()
        self.gate_up = Fp8Linear(gate_up, path, op, contract)
        self.down = Fp8Linear(down, path, op, contract)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=1)
        return self.down(torch.nn.functional.silu(gate) * up)

    def notes(self) -> str:
        """What the last calls padded or split; cleared."""
        said = "; ".join(sorted(self.gate_up.notes | self.down.notes)) or "-"
        self.gate_up.notes.clear()
        self.down.notes.clear()
        return said


def median_us(fn, reps: int, flush: torch.Tensor) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="ksci_fp8_gemm_kmajor", help="the exported package (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=30, help="timed calls per path and token count")
    args = parser.parse_args()
    package = importlib.import_module(args.package)
    spec = package.SPEC
    op = getattr(getattr(torch.ops, spec["namespace"]), spec["entry"])
    torch.manual_seed(0)
    gate_up = torch.randn((2 * EXPERT_INTERMEDIATE, HIDDEN), device="cuda") * HIDDEN**-0.5
    down = torch.randn((HIDDEN, EXPERT_INTERMEDIATE), device="cuda") * EXPERT_INTERMEDIATE**-0.5
    layers = {p: ExpertMlp(gate_up, down, p, op, spec["contract"]) for p in ("op", "vendor")}
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"{torch.cuda.get_device_name()}; DeepSeek-V3 MoE expert MLP (7168 -> 2x2048 -> 7168), FP8 block-scaled")
    print(
        f"op: {spec['namespace']}::{spec['entry']} (run {spec['run']}, candidate {spec['candidate']}); vendor: torch._scaled_mm"
    )
    print(f"{'tokens':>6} {'op us':>9} {'vendor us':>10} {'vendor/op':>9} {'rel diff':>9}  padded or split")
    with torch.inference_mode():
        for tokens in TOKENS:
            x = torch.randn((tokens, HIDDEN), dtype=torch.bfloat16, device="cuda")
            outs = {p: layer(x) for p, layer in layers.items()}
            diff = ((outs["op"].float() - outs["vendor"].float()).norm() / outs["vendor"].float().norm()).item()
            notes = " / ".join(f"{p}: {layer.notes()}" for p, layer in layers.items())
            times = {p: median_us(lambda layer=layer, x=x: layer(x), args.reps, flush) for p, layer in layers.items()}
            ratio = times["vendor"] / times["op"]
            print(f"{tokens:6d} {times['op']:9.1f} {times['vendor']:10.1f} {ratio:9.2f} {diff:9.2e}  {notes}")


if __name__ == "__main__":
    main()
