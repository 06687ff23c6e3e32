"""cuBLASLt's FP8 block-scaled GEMM (fp8_gemm_kmajor's vendor baseline) launched three times on 6144x4608x7168,
for ncu to profile by hand (docs/results.md, issue 28):
    ncu --clock-control none --metrics ... -k regex:gemm --launch-skip 1 --launch-count 2 python3 vendor_ncu.py
"""

import torch

from ksci.problem.spec import load_problem

p = load_problem("fp8_gemm_kmajor")
ref = p.reference_module()
shape = {"m": 6144, "n": 4608, "k": 7168}
inp = ref.generate_input(shape, 1, "cuda", "cuda")
run = ref.vendor(inp)
for _ in range(3):
    run()
torch.cuda.synchronize()
