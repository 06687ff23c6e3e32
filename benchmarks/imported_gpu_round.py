"""On a GPU: import gpu-mode tasks there (their real runs use the GPU), time each imported task's reference and
vendor baseline (`ksci baseline`), and evolve amd/moe and amd/mla-decode for two generations with the scripted LLM
server. Prints a table per part.

The kernels the scripted writer answers with are placeholders written here (an entry point that launches nothing
and returns 0): no model wrote them and they compute nothing, so their verdict is expected to be `wrong` (outputs
left unwritten); the run shows that an imported task goes through generation 0 and 1 and every row gets a verdict.

    python benchmarks/imported_gpu_round.py --tasks DIR            (DIR: a reference-kernels checkout's problems/,
                                                                    or any folder holding task folders)
    python benchmarks/imported_gpu_round.py --tasks DIR --only amd/fp8-mm amd/moe --no-evolve
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

EVOLVED = ("amd/moe", "amd/mla-decode")
KEY = "sk-test-SECRET123"


def problem_name(label: str) -> str:
    return "gm_" + "".join(c if c.isalnum() else "_" for c in label.lower()).strip("_")


def import_tasks(tasks: Path, only: list[str] | None, dest: Path) -> dict[str, str]:
    """label -> problem name for the tasks that imported; prints one line per task."""
    from ksci.importers.gpumode import import_gpumode

    imported = {}
    for task in sorted(tasks.rglob("task.yml")):
        label = str(task.parent.relative_to(tasks))
        if only and label not in only:
            continue
        started = time.monotonic()
        result = import_gpumode(task.parent, problem_name(label), dest, replace=True)
        ok = not hasattr(result, "construct")
        print(f"import {label}: {'imported' if ok else 'refused ' + str(result)} ({time.monotonic() - started:.0f} s)")
        if ok:
            imported[label] = problem_name(label)
    return imported


def baselines(imported: dict[str, str], env: dict, timeout: float) -> None:
    print("\n| task | status | reference us | vendor us | s |\n|---|---|---|---|---|")
    for label, name in imported.items():
        started = time.monotonic()
        command = [sys.executable, "-m", "ksci.cli", "baseline", "--problem", name, "--target", "cuda", "--json"]
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            verdict = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
            status = verdict.get("status") or f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[0]}"
        except (subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            verdict, status = {}, type(exc).__name__
        ref, vendor = verdict.get("reference_geomean_us"), verdict.get("vendor_geomean_us")
        cells = (label, str(status)[:300], f"{ref:.1f}" if ref else "-", f"{vendor:.1f}" if vendor else "-")
        print("| " + " | ".join(cells) + f" | {time.monotonic() - started:.0f} |", flush=True)


def placeholder(name: str, work: Path) -> Path:
    """An entry point with the problem's signature that launches nothing: compiles, computes nothing."""
    from ksci.problem.spec import load_problem

    problem = load_problem(name)
    path = work / f"{name}.cu"
    path.write_text(
        "// placeholder for a scripted run: no model wrote this; it writes no output\n"
        "#include <cuda_runtime.h>\n\n"
        f"{problem.entry_signature} {{\n    return 0;\n}}\n"
    )
    return path


def evolve(names: list[str], env: dict, work: Path, simulate: bool) -> None:
    import support.imported_script as script
    from support.fp8_gemm_script import demo_config_toml
    from support.scripted_llm_server import ScriptedLlmServer

    from ksci.lineage.store import LineageStore

    paths = {name: placeholder(name, work) for name in names}
    script.kernels = lambda name: {"correct": paths[name]}  # the scripted writer's answers: the placeholders
    store = work / "store"
    with ScriptedLlmServer(script.imported_script(names)) as server:
        config = work / "ksci-llm-demo.toml"
        config.write_text(demo_config_toml(server.base_url))
        for name in names:
            run = f"imported-{name}-{time.strftime('%H%M%S')}"
            command = [sys.executable, "-m", "ksci.cli", "evolve", "--problem", name, "--target", "cuda"]
            command += ["--proposer", "llm", "--llm-config", str(config), "--generations", "2", "--children", "2"]
            command += ["--run", run, "--store", str(store), *(["--simulate"] if simulate else [])]
            started = time.monotonic()
            done = subprocess.run(
                command, cwd=ROOT, env={**env, "KSCI_LLM_API_KEY": KEY}, capture_output=True, text=True
            )
            print(f"\nevolve {name}: exit {done.returncode} after {time.monotonic() - started:.0f} s")
            if done.returncode != 0:
                print(done.stderr[-2000:])
            if run in LineageStore(store).runs():
                rows = LineageStore(store).read(run).sort_values(["generation", "candidate_id"])
                print(rows[["generation", "candidate_id", "parent_id", "status", "message"]].to_string(index=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=Path, required=True, help="a folder holding gpu-mode task folders")
    parser.add_argument("--only", nargs="*", help="these task labels only (amd/fp8-mm, ...)")
    parser.add_argument("--no-evolve", action="store_true", help="imports and baselines only")
    parser.add_argument(
        "--evolve", nargs="*", default=list(EVOLVED), help="the tasks to evolve (amd/moe amd/mla-decode)"
    )
    parser.add_argument("--simulate", action="store_true", help="evolve with the simulator (no GPU)")
    parser.add_argument("--baseline-timeout", type=float, default=120.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ksci-gpu-round-"))
    dest = work / "kernels"
    os.environ["KSCI_KERNELS_DIR"] = str(dest)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    imported = import_tasks(args.tasks, args.only, dest)
    if not args.simulate:
        baselines(imported, env, args.baseline_timeout)
    names = [imported[label] for label in args.evolve if label in imported]
    if names and not args.no_evolve:
        evolve(names, env, work, args.simulate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
