"""No host file reaches a kernel or the LLM through a problem folder (issue 51): a template that includes, imports
or extends a file that is a link to /etc/passwd, a reference.py or a knowledge.md that is such a link. Planted
before the problem loads, `ksci problems` lists it as broken with one line and `ksci evolve` refuses it with one
line (rc 2); planted after it loaded (a folder changed under a running process), rendering the seed and building
the designer's and writer's prompts as the LLM proposer does are refused with a ProblemError of one line. In no
case does `root:x:0` reach a rendered source, a prompt or a message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ksci import cli
from ksci.llm import designer, writer
from ksci.llm.knowledge import load_knowledge
from ksci.problem.render import render_kernel
from ksci.problem.spec import ProblemError, load_problem

ROOT = Path(__file__).resolve().parent.parent
PASSWD_LINE = "root:x:0"
NAIVE = Path("templates/cuda/naive.cu.j2")
# What each attack plants: (the template's new first line or None, the file made a link to /etc/passwd).
ATTACKS = {
    "include": ('{% include "leak.j2" %}', "templates/cuda/leak.j2"),
    "import": ('{% import "leak.j2" as leak %}{{ leak }}', "templates/cuda/leak.j2"),
    "extends": ('{% extends "leak.j2" %}', "templates/cuda/leak.j2"),
    "reference": (None, "reference.py"),
    "knowledge": (None, "knowledge.md"),
}


@pytest.fixture
def kernels(tmp_path, monkeypatch) -> Path:
    """A copy of rmsnorm (with a knowledge.md) as the only problem on the search path."""
    folder = tmp_path / "kernels"
    shutil.copytree(ROOT / "kernels" / "rmsnorm", folder / "rmsnorm", ignore=shutil.ignore_patterns("solutions"))
    (folder / "rmsnorm" / "knowledge.md").write_text("Rows are short: one block per row.\n")
    monkeypatch.setenv("KSCI_KERNELS_DIR", str(folder))
    return folder


def plant(problem: Path, attack: str) -> None:
    line, link = ATTACKS[attack]
    if line is not None:
        template = problem / NAIVE
        template.write_text(f"{line}\n{template.read_text()}")
    (problem / link).unlink(missing_ok=True)
    (problem / link).symlink_to("/etc/passwd")


def _one_line(text: str) -> None:
    assert text.strip().count("\n") == 0, text
    assert PASSWD_LINE not in text


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_link_planted_before_loading_makes_the_problem_broken(kernels, attack, capsys):
    plant(kernels / "rmsnorm", attack)
    assert cli.main(["problems", "--json"]) == 1
    (entry,) = json.loads(capsys.readouterr().out)
    assert "is a link that leads outside the problem folder" in entry["broken"]
    _one_line(entry["broken"])
    assert cli.main(["evolve", "--problem", "rmsnorm", "--simulate", "--store", str(kernels.parent / "runs")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("ksci: error: ")
    _one_line(captured.err)
    assert not (kernels.parent / "runs").exists()


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_link_planted_after_loading_reaches_no_source_and_no_prompt(kernels, attack):
    problem = load_problem("rmsnorm")
    naive = problem.template("cuda", "naive")
    plant(problem.root, attack)
    for make in (lambda: render_kernel(naive), lambda: _prompts(problem)):
        try:
            made = make()
        except ProblemError as exc:
            _one_line(str(exc))
            assert "leads outside the problem folder" in str(exc)
        else:
            assert PASSWD_LINE not in made


def _prompts(problem) -> str:
    """The designer's and the writer's messages, built as the LLM proposer builds them (proposers/scientist.py)."""
    knowledge = load_knowledge(problem, "cuda")
    base = {"id": "b" * 16, "source": render_kernel(problem.template("cuda", "naive")), "geomean": "9.00 us",
            "hypothesis": "seed", "language": "cuda"}  # fmt: skip
    plan = designer.Plan("Vectorise", "Load 16 bytes a thread.", ("use float4",), 10, 60, 8, "most innovative")
    asked = designer.build_request(problem, "cuda", base, None, knowledge, [], []).messages
    bench = writer.Workbench(problem, "cuda", "cuda", base, None, knowledge)
    asked += writer.build_request(bench, plan, [], [], slot="plan-0/attempt-1").messages
    return "".join(m["content"] for m in asked)


def test_links_between_problems_beside_each_other_still_load():
    """fp8_gemm and fp8_gemm_kmajor share a core template through a link: that is no host file."""
    for name in ("fp8_gemm", "fp8_gemm_kmajor"):
        problem = load_problem(name)
        assert PASSWD_LINE not in render_kernel(problem.templates_for("cuda")[-1])


def test_a_gpu_mode_task_whose_file_links_outside_it_is_not_imported(tmp_path):
    """The importer copies a task's submission.py and task.py verbatim into imported/, which the writer reads."""
    from ksci.importers.common import ImportFailure
    from ksci.importers.gpumode import import_gpumode

    task = tmp_path / "task"
    shutil.copytree(ROOT / "tests" / "data" / "gpumode" / "fp8_mm", task)
    (task / "submission.py").unlink()
    (task / "submission.py").symlink_to("/etc/passwd")
    failed = import_gpumode(task, dest=tmp_path / "dest")
    assert isinstance(failed, ImportFailure) and "submission.py is a link that leads outside" in str(failed)
    assert not (tmp_path / "dest").exists() or not any((tmp_path / "dest").iterdir())
