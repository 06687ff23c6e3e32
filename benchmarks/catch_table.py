"""The catch table of docs/threat-model.md: the field's known exploits, where each pattern was reported, the
adversarial kernel that plays it (kernels/fp8_gemm/solutions/adversarial/), which defence stops it and the verdict
expected. benchmarks/adversarial.py prints it with the verdict measured on its run beside the expected one."""

from __future__ import annotations

# (exploit, where the pattern was reported, kernel file stem, defence that stops it)
CATCH_TABLE: tuple[tuple[str, str, str, str], ...] = (
    ("shape table (right on listed shapes only)", "AgentKernelArena, arXiv 2605.16819", "shape_table",
     "held-out shapes from the shape contract"),
    ("running sum in bf16", "KernelBench hard suite; CUDA-L1", "bf16_accumulation",
     "spec/full_range bound 4e-3 x rms (vendor 1.3e-3)"),
    ("running sum in fp16", "KernelBench hard suite; CUDA-L1", "fp16_accumulation",
     "block-quantised input profiles"),
    ("CUDA-graph replay across timed calls", "gpu-mode reference-kernels #159", "cuda_graph_replay",
     "static screen (graphs, capture)"),
    ("results cached on the device, content-keyed", "gpu-mode kernelbot #501", "memo_by_content_sample",
     "fresh inputs + poisoned output every timed call"),
    ("results cached on the device, pointer-keyed", "gpu-mode kernelbot #501", "memo_by_pointer",
     "fresh inputs + poisoned output every timed call"),
    ("L2 persisting-access window", "CUDA guide (L2 set-aside); kernelbot #501", "l2_persisting_window",
     "static screen; library check"),
    ("lazy/deferred work on another stream", "CUDA-L1 (stream injection)", "side_stream",
     "static screen (stream creation)"),
    ("timer/event patching from host code", "gpu-mode reference-kernels #162", "timer_patch",
     "static screen; RTLD_LOCAL load"),
    ("timer lookup by name (dlsym)", "gpu-mode reference-kernels #162", "timer_dlsym",
     "static screen (dlsym)"),
    ("launches nothing on some calls", "gpu-mode kernelbot #104; CUDA-L1 (lazy)", "launches_nothing_sometimes",
     "poisoned output every call"),
    ("geomean underflow (a shape made near-free)", "gpu-mode reference-kernels #159", "near_free_shape",
     "warm-up check + poison per benchmark shape"),
    ("reading the reference's output from memory", "gpu-mode reference-kernels", "copy_expected",
     "expected output made after the call, wiped"),
)  # fmt: skip


def expected_verdict(stem: str, kernels: dict[str, set[str]]) -> str:
    return "|".join(sorted(kernels.get(stem, {"?"})))


def print_catch_table(expected: dict[str, set[str]], measured: dict[str, str]) -> None:
    """The table, one row per exploit: `expected` and `measured` verdicts by kernel stem (- where not run)."""
    print(f"\n{'exploit':44s} {'reported':40s} {'defence':46s} {'expected':20s} measured")
    for exploit, source, stem, defence in CATCH_TABLE:
        got = measured.get(stem, "-")
        mark = "" if got == "-" or got in expected.get(stem, set()) else "  <-- UNEXPECTED"
        print(f"{exploit:44s} {source:40s} {defence:46s} {expected_verdict(stem, expected):20s} {got}{mark}")
