"""The program a profiler watches: it calls one candidate's entry point on one shape a few times, nothing else.

Run as `python -m ksci.profile.runner REQUEST.json` (ksci.profile.run writes the request). It loads the problem and
its reference, draws one input set (ksci.evaluate.harness.cases.Case, as the harness does) and loads the library
with the harness's own loader (ksci.evaluate.harness.child.Candidate), so the kernel runs exactly as it is timed.
Warm-up calls run first; then `calls` calls, each inside the NVTX range RANGE, which is all Nsight Compute profiles
(`--nvtx-include ksci_profile/`): the kernels that draw the inputs are left out. It writes what GPU it ran on to
device.json beside the request. The library is one the evaluation already built, screened and checked.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from ksci.evaluate.harness.cases import Case
from ksci.evaluate.harness.child import Candidate
from ksci.problem.spec import load_problem

RANGE = "ksci_profile"


def run(request: dict, out_dir: Path) -> None:
    problem = load_problem(request["problem"])
    ref = problem.reference_module()
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    shape = request["shape"]
    case = Case(problem, ref, shape, int(shape.get("seed", 0)), request["target"], device, keep_pristine=False)
    candidate = Candidate(request["library"], problem.entry_name, problem.entry_args)
    stream = torch.cuda.default_stream(device)
    for _ in range(int(request.get("warmup", 2))):
        candidate(case.tensors, shape, stream)
    torch.cuda.synchronize()
    for _ in range(int(request.get("calls", 3))):
        torch.cuda.nvtx.range_push(RANGE)
        candidate(case.tensors, shape, stream)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    props = torch.cuda.get_device_properties(0)
    info = {"gpu": props.name, "multiprocessors": props.multi_processor_count}
    (out_dir / "device.json").write_text(json.dumps(info))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("request")
    args = parser.parse_args(argv)
    path = Path(args.request)
    run(json.loads(path.read_text()), path.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
