"""Other processes on the GPU a candidate was timed on: named in a `suspicious` verdict, since they, not the kernel,
may be why its clocks disagreed.

ksci runs one evaluation per GPU (ksci.devices' locks, across every ksci process of the host), but nothing stops a
training job or a notebook from using the same GPU. Its kernels then share the GPU's time with the candidate's
calls, and the timing rules (ksci/evaluate/judge/timing_rules.py) may see host gaps or clock differences that the candidate
did not cause: on 2 x H200 (docs/results.md, issue 30) a second process on one GPU made 4 of 120 honest
evaluations `suspicious`, and none of 156 once each GPU ran one. The verdict stays `suspicious` (the times are not
the kernel's own), but says who else was there, so that the user evaluates again rather than distrusts the rule.

NVIDIA only: `nvidia-smi --query-compute-apps` lists the processes with a context on each GPU. ROCm's tools
(rocm-smi, amd-smi) print processes without a GPU mapping that is stable across versions: none is named there.
"""

from __future__ import annotations

import os
import shutil
import subprocess

QUERY_TIMEOUT_S = 10.0
MAX_NAMED = 4


def gpu_neighbours(gpu_uuid: str | None, target: str, own_pids: frozenset[int] = frozenset()) -> list[str]:
    """Processes other than `own_pids` (and this one) with a context on the GPU `gpu_uuid` now, as "pid name";
    empty when there are none, or when that cannot be known (no uuid, not NVIDIA, no nvidia-smi, it failed)."""
    tool = shutil.which("nvidia-smi")
    if not gpu_uuid or target != "cuda" or tool is None:
        return []
    try:
        done = subprocess.run(
            [tool, "--query-compute-apps=gpu_uuid,pid,process_name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    mine = own_processes(own_pids | {os.getpid()})
    wanted = gpu_uuid.lower().removeprefix("gpu-")
    found = []
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.split(",", 2)]
        if len(cells) < 3 or cells[0].lower().removeprefix("gpu-") != wanted or not cells[1].isdigit():
            continue
        if int(cells[1]) not in mine:
            found.append(f"{cells[1]} {os.path.basename(cells[2])}")
    return found


def own_processes(roots: frozenset[int] | set[int]) -> set[int]:
    """`roots` and every process descended from one of them (Linux /proc): a harness child in its sandbox runs Python
    under the sandbox's launcher, so the process with a GPU context is a grandchild of the pid the parent started,
    and it is this run's own, not a neighbour. Only `roots` where /proc cannot be read."""
    parents: dict[int, int] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return set(roots)
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces and parentheses
        if len(fields) > 1 and fields[1].isdigit():
            parents[int(entry)] = int(fields[1])
    mine = set(roots)
    for pid in parents:
        chain, seen = pid, set()
        while chain in parents and chain not in mine and chain not in seen:
            seen.add(chain)
            chain = parents[chain]
        if chain in mine:
            mine.add(pid)
    return mine


def with_neighbours(message: str, neighbours: list[str]) -> str:
    """A suspicious verdict's message, with the processes that shared its GPU named after it."""
    if not neighbours:
        return message
    named = ", ".join(neighbours[:MAX_NAMED]) + (
        f" and {len(neighbours) - MAX_NAMED} more" * (len(neighbours) > MAX_NAMED)
    )
    return (
        f"{message}\nnote: other processes were using this GPU when the timing ended (pid {named}): their work shares"
        " the GPU's time with the kernel's calls and can make the clocks disagree; evaluate again on an idle GPU"
    )
