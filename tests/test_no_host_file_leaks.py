"""No host file reaches anything a run writes, through a whole LLM evolution whose writer answers with hostile
kernels that are COMPILED FOR REAL (issue 26: "nothing leaked: grep of the whole store, prefect.db, artifacts
and report for the key and for `root:x:0`").

`ksci evolve --proposer llm` runs as a user runs it (its own PREFECT_HOME, the embedded Prefect API, a store),
against a scripted OpenAI-compatible server (support.scripted_llm_server) whose writer answers each plan with a
kernel that makes the compiler read /etc/passwd or a .env planted in the project with a key, spelled past the
static screen: `#define P </etc/passwd>` + `#include P`, `%:include`, `asm(".incbin ...")`, a stringized macro
naming the .env. The backend is the stand-in support.compiling_simulator: nvcc compiles every source in the
sandbox, the simulator stands in for the GPU. The compile logs then travel as in production: into the writer's
repair prompt, the lineage rows, the run's log, Prefect's stored results and database, its artifacts, the
report. Neither `root:x:0` nor the planted key is in any of them, nor in any file the run and `ksci report` left
under the test's folder, nor in their output. Each file is searched with what it encodes: Prefect's stored
results are base64 pickles inside JSON (a grep of the bytes never sees a compile log there) and Parquet pages may
be compressed. The control runs the same evolution with the sandbox turned off (KSCI_UNSANDBOXED_COMPILE=1): the
same searches find both in the prompts, the store, prefect.db and the stored results, so they can see a leak.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.fp8_gemm_script import GEN1, PLAN, demo_config_toml, steady_script
from support.leak_search import readable
from support.prefect_db import seeded_home
from support.scripted_llm_server import PromptKeepingServer

from ksci.evaluate.sandbox.compiler import OPT_OUT
from ksci.lineage.store import LineageStore
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem

pytestmark = [pytest.mark.slow, pytest.mark.nvcc]
ROOT = Path(__file__).resolve().parent.parent
PASSWD = "/etc/passwd"
PASSWD_LINE = "root:x:0"
# Each account of this host's /etc/passwd as `name:x:uid:gid`: a log's tail may quote later lines than root's.
PASSWD_ENTRIES = tuple(":".join(line.split(":")[:4]) for line in Path(PASSWD).read_text().splitlines() if line)
PLANTED_KEY = "sk-planted-DOTENV-4e1b9d02"  # in the project's .env only: no LLM config names it, no scrubber knows it
LLM_KEY = "sk-test-writer-7c1d"
RUN = "hostile"
REPAIR = "# Your attempt 1 failed: compile_error"
SECOND_REPAIR = "# Your attempt 2 failed: compile_error"


@dataclass(frozen=True)
class Evolution:
    """What one run left: its folder (store, PREFECT_HOME, compile cache, report), output, and the prompts sent."""

    folder: Path
    output: str
    prompts: list[str]
    planted_env: Path


def _kernel(**params) -> str:
    """The fp8_gemm mma seed at a point, without its provenance line: a kernel that compiles, to carry a trick."""
    source = render_kernel(load_problem("fp8_gemm").template("cuda", "mma"), params)
    return source.split("\n", 1)[1]


def _code(source: str) -> str:
    return f"Here is the kernel.\n\n```cuda\n{source}```\n"


def hostile_script(planted_env: Path) -> dict:
    """steady_script's selector, designer and findings; a writer whose first answer to each of the three plans is a
    kernel that ends with a trick making the compiler read a host file (at the end, so that the compiler's
    complaints quoting it are the log's tail, the part the writer is shown). Repairs (their prompts carry the last
    attempt's compile log) are a second trick, the .env, for the first plan, and clean kernels."""
    square, rows, halve = (PLAN + p["title"] for p in GEN1[:3])
    tricks = {
        "macro_angle": f"#define P <{PASSWD}>\n#include P\n",
        "digraph": f'%:include "{PASSWD}"\n',
        "asm_incbin": f'asm(".section .rodata\\n.incbin \\"{PASSWD}\\"\\n.text");\n',
        "env_macro": f"#define S(x) #x\n#define XS(x) S(x)\n#define ENV XS({planted_env})\n#include ENV\n",
    }
    square_kernel, rows_kernel = _kernel(BM=128, BN=128), _kernel(BM=64, BN=128, WARPS_M=2)
    halve_kernel = _kernel(BM=64, BN=64, WARPS_M=2, WARPS_N=2)
    writer = [  # the first that matches answers: the latest attempt's failure first
        {"match": [square, SECOND_REPAIR], "content": _code(square_kernel), "repeat": True},
        {"match": [square, REPAIR], "content": _code(square_kernel + tricks["env_macro"]), "repeat": True},
        {"match": [rows, REPAIR], "content": _code(rows_kernel), "repeat": True},
        {"match": [halve, REPAIR], "content": _code(halve_kernel), "repeat": True},
        {"match": square, "content": _code(square_kernel + tricks["macro_angle"]), "repeat": True},
        {"match": rows, "content": _code(rows_kernel + tricks["digraph"]), "repeat": True},
        {"match": halve, "content": _code(halve_kernel + tricks["asm_incbin"]), "repeat": True},
    ]
    return {**steady_script(), "writer": writer}


def _ksci(argv: list[str], folder: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    """`ksci` with the compiling stand-in as its backend, its own PREFECT_HOME and compile cache under `folder`."""
    env = dict(os.environ, PREFECT_HOME=str(seeded_home(folder / "prefect")))
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{ROOT / 'tests'}"
    env.update(KSCI_LLM_API_KEY=LLM_KEY, KSCI_COMPILE_CACHE=str(folder / "project" / "data" / "cache" / "compile"))
    env.update(extra_env)
    for name in ("PREFECT_API_URL", OPT_OUT):
        if name not in extra_env:
            env.pop(name, None)
    command = [sys.executable, "-m", "support.compiling_simulator", *argv]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def evolve_hostile(folder: Path, extra_env: dict[str, str], report: bool = True) -> Evolution:
    """One generation of seeds and one of the LLM's hostile kernels, then (`report`) `ksci report`."""
    project = folder / "project"
    project.mkdir(parents=True)
    planted_env = project / ".env"  # beside data/, where a project's .env sits
    planted_env.write_text(f"OPENAI_API_KEY={PLANTED_KEY}\n")
    with PromptKeepingServer(hostile_script(planted_env)) as server:
        config = folder / "ksci.toml"
        toml = demo_config_toml(server.base_url, timeout_s=30.0, retry_delay_s=0.1)
        config.write_text(toml.replace("repairs = 1", "repairs = 2"))  # the .env trick's log goes back too
        evolve = ["evolve", "--problem", "fp8_gemm", "--target", "cuda", "--arch", "sm_90a", "--children", "3"]
        evolve += ["--generations", "2", "--proposer", "llm", "--llm-config", str(config), "--simulate"]
        evolve += ["--run", RUN, "--store", str(folder / "store"), "--no-profile"]
        done = _ksci(evolve, folder, extra_env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    if report:
        made = _ksci(["report", "--run", RUN, "--store", str(folder / "store"), "-o", str(folder / "report.html")],
                     folder, extra_env)  # fmt: skip
        assert made.returncode == 0 and (folder / "report.html").is_file(), made.stdout + made.stderr
        output += made.stdout + made.stderr
    return Evolution(folder, output, server.prompts, planted_env)


def holding(evolution: Evolution, secrets: tuple[str, ...]) -> list[str]:
    """Every file under the run's folder (store, PREFECT_HOME, compile cache, report) that holds one of `secrets`,
    the planted .env itself aside."""
    files = (p for p in evolution.folder.rglob("*") if p.is_file() and p != evolution.planted_env)
    found = (p for p in files if any(s.encode() in readable(p) for s in secrets))
    return sorted(str(p.relative_to(evolution.folder)) for p in found)


def repair_prompts(evolution: Evolution) -> list[str]:
    """The writer's prompts that carry a failed compile's feedback."""
    return [p for p in evolution.prompts if "[ksci stage: writer]" in p and " failed: compile_error" in p]


def sent(evolution: Evolution, secrets: tuple[str, ...]) -> bool:
    return any(s in p for p in evolution.prompts for s in secrets)


@pytest.fixture
def folder():
    """A folder whose path the screen reads as plain text: pytest-xdist's tmp_path holds 'popen-gwN', and the screen
    rejects a kernel naming `popen` (the .env's path is spelled into one kernel), which left that plan unexercised."""
    path = Path(tempfile.mkdtemp(prefix="ksci-hostile-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_hostile_kernels_compiled_in_the_sandbox_leak_nothing_anywhere(folder):
    evolution = evolve_hostile(folder, {})
    rows = LineageStore(folder / "store").read(RUN)
    llm = rows[rows["proposer"] == "llm"]
    # The tricks reached the real compiler (past the screen) and failed there; the repaired kernels compiled.
    failed = llm[llm["status"] == "compile_error"]
    assert len(failed) == 4 and (llm["status"] == "ok").sum() == 3, llm[["status", "message"]].to_string()
    toolchains = {json.loads(f)["toolchain"] for f in failed["fingerprint_json"]}
    assert all(t.startswith("Cuda compilation tools") for t in toolchains), toolchains  # nvcc, not the simulator
    # The channel was exercised: each repair prompt carried the last attempt's compile log, which names the file
    # the sandbox did not have; so do Prefect's stored results (decoded), which were searched.
    repairs = repair_prompts(evolution)
    assert len(repairs) == 4, [p[-2000:] for p in repairs]
    missing = re.compile(r"(/etc/passwd|\.env): No such file or directory|file not found: /etc/passwd")
    assert all(missing.search(p) for p in repairs), [p[-1500:] for p in repairs]
    assert any(f"{evolution.planted_env}: No such file or directory" in p for p in repairs)
    assert "prefect/storage" in str(holding(evolution, ("/etc/passwd: No such file or directory",)))
    assert (folder / "prefect").is_dir() and list((folder / "prefect").rglob("prefect.db*"))
    # Nothing leaked: not to the LLM, not into any file the run or its report wrote, not to the terminal.
    for secrets in ((PASSWD_LINE, *PASSWD_ENTRIES), (PLANTED_KEY,)):
        assert not sent(evolution, secrets), f"{secrets[0]} was sent to the LLM"
        assert holding(evolution, secrets) == [], f"{secrets[0]} was written"
        assert not any(s in evolution.output for s in secrets)


def test_without_the_sandbox_the_same_evolution_does_leak(folder):
    """The greps above can see a leak: with the documented opt-out, nvcc reads /etc/passwd and the .env, its log
    quotes their lines, and they reach the writer's repair prompt, the run's log in the store, Prefect's database
    (the flow's logs) and its stored results (seen only once decoded: they are base64 pickles)."""
    evolution = evolve_hostile(folder, {OPT_OUT: "1"}, report=False)
    for secret in (PASSWD_LINE, PLANTED_KEY):
        leaked = holding(evolution, (secret,))
        assert sent(evolution, (secret,)), f"{secret} never reached the writer"
        for place in ("store/", "prefect/prefect.db", "prefect/storage/"):
            assert any(p.startswith(place) for p in leaked), (secret, place, leaked)
