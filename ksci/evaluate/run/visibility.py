"""Which GPUs this process may use, and the environment that shows a harness child exactly one of them.

A GPU is named by its index among the GPUs this process may see (0..N-1): where CUDA_VISIBLE_DEVICES (or
HIP_VISIBLE_DEVICES) already restricts the process, index i is the i-th GPU of that list, so that a worker started
on GPUs 4,6 hands its child "6" for index 1.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from ksci.evaluate.options import EnvironmentProblem


def gpu_visible(target: str) -> bool:
    if target == "rocm":
        return os.path.exists("/dev/kfd")
    return _nvidia_gpu_count() > 0


@functools.cache
def _nvidia_gpu_count() -> int:
    """GPUs that `nvidia-smi -L` lists (0 without the tool or a driver). Asked once per process: every harness start
    asks whether a GPU is visible, often while another candidate is timed, and nvidia-smi wakes the driver and
    queries every GPU (NVML) each time; the run's own processes leave the GPUs alone while a candidate is timed."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


def _inherited_devices(target: str) -> tuple[str, list[str]]:
    """The visible-devices variable of the target and the GPUs it already restricts this process to."""
    variable = "HIP_VISIBLE_DEVICES" if target == "rocm" else "CUDA_VISIBLE_DEVICES"
    return variable, [d for d in os.environ.get(variable, "").split(",") if d]


def pin_device(device: str, target: str) -> dict[str, str]:
    """Environment that shows the child one GPU: `device` indexes the GPUs this process may already see."""
    variable, inherited = _inherited_devices(target)
    index = int(device)
    if inherited and index >= len(inherited):
        raise EnvironmentProblem(f"GPU {device} is not among the {len(inherited)} in {variable}={','.join(inherited)}")
    return {variable: inherited[index] if inherited else device}


def visible_gpus(target: str) -> list[str]:
    """Indices of the GPUs this process may use (0..N-1), or [] without any."""
    if not gpu_visible(target):
        return []
    _, inherited = _inherited_devices(target)
    if inherited:
        return [str(i) for i in range(len(inherited))]
    if target == "rocm":
        return ["0"]  # rocm-smi is not required; pass --gpus to use more
    return [str(i) for i in range(_nvidia_gpu_count())]
