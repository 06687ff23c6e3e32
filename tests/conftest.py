"""Markers: GPU tests skip without a GPU; tool tests skip without the tool (CI installs nvcc, hipcc, chromium)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# A Prefect home of this test session's own (its database and the task results it persists), made before anything
# imports prefect: a test's cache hits then come from this session alone. With the project's data/prefect, results
# persisted by an earlier session (under other code, other timing) were replayed into this one's assertions.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="ksci-tests-prefect-")
# GPU lock files of this session's own (ksci.devices): the test GPUs "0", "1" of parallel test sessions, or of a
# real run on this host, are other GPUs than this session's.
os.environ["KSCI_GPU_LOCK_DIR"] = tempfile.mkdtemp(prefix="ksci-tests-gpu-locks-")

from support.file_order import longest_files_first  # noqa: E402
from support.prefect_db import TEMPLATE_DIR_ENV, seeded_home  # noqa: E402
from support.shared_api import start_shared_api  # noqa: E402

from ksci.evaluate.run.visibility import gpu_visible  # noqa: E402
from ksci.evaluate.toolchain.sass import SassToolsMissing, find_sass_tools  # noqa: E402
from ksci.evaluate.toolchain.toolchains import ToolchainMissing, find_toolchain  # noqa: E402

# One line per HIP compile, printed at the end of the session (CI runs without -s): tests/test_hip_gfx942.py.
HIP_COMPILE_LINES = pytest.StashKey[list[str]]()


def _hip_gfx942_missing() -> str | None:
    try:
        find_toolchain("rocm", "gfx942")
    except ToolchainMissing as exc:
        return f"no compiler for gfx942: {exc}"
    return None


def _sass_tools_missing() -> str | None:
    try:
        find_sass_tools(shutil.which("nvcc") or "nvcc")
    except SassToolsMissing as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config, items):
    skips = {
        "gpu": None if gpu_visible("cuda") or gpu_visible("rocm") else "no GPU on this machine",
        "nvcc": None if shutil.which("nvcc") else "nvcc is not installed",
        "hipcc": None if shutil.which("hipcc") else "hipcc is not installed (apt-get install hipcc)",
        "hip_gfx942": _hip_gfx942_missing(),
        "clang_host": None if shutil.which("clang++-19") else "clang++-19 is not installed (apt-get install clang-19)",
        "chromium": None if shutil.which("chromium") else "chromium is not installed (apt-get install chromium)",
        "cuobjdump": _sass_tools_missing(),
    }
    # CI sets KSCI_REQUIRE_TOOLCHAINS=1: there a missing compiler fails the run instead of skipping its checks.
    required = os.environ.get("KSCI_REQUIRE_TOOLCHAINS") == "1"
    for item in items:
        for marker, reason in skips.items():
            if reason and marker in item.keywords:
                if required and marker in ("nvcc", "hipcc", "hip_gfx942", "clang_host", "chromium", "cuobjdump"):
                    raise pytest.UsageError(f"KSCI_REQUIRE_TOOLCHAINS=1 but {reason}")
                item.add_marker(pytest.mark.skip(reason=reason))
    longest_files_first(items)  # the order make test's workers take the files in (--no-loadscope-reorder)


@pytest.fixture(scope="session", autouse=True)
def _migrated_prefect_database(tmp_path_factory) -> None:
    """Where tests/support/prefect_db.py keeps the session's migrated Prefect database (shared by the xdist
    workers); under xdist (make test), each worker's PREFECT_HOME above gets a copy before its first test."""
    base = tmp_path_factory.getbasetemp()
    os.environ[TEMPLATE_DIR_ENV] = str(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        seeded_home(Path(os.environ["PREFECT_HOME"]))


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory) -> Path:
    """A compile cache (ksci.evaluate.toolchain.compile) for the tests that build sources and judge only what the build gave:
    keyed by source, compiler and flags and published atomically, it is shared by the session and its xdist
    workers, so that a point several tests build (a template's default) is compiled once."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "compile-cache"


@pytest.fixture
def gpu_target() -> str:
    return "cuda" if gpu_visible("cuda") else "rocm"


@pytest.fixture(scope="session")
def hip_compile_lines(request) -> list[str]:
    """Lines for the session summary: append one per HIP compile."""
    return request.config.stash.setdefault(HIP_COMPILE_LINES, [])


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(HIP_COMPILE_LINES, [])
    if lines:
        terminalreporter.section("HIP compiles (file, arch, compiler, resources per kernel)")
        for line in sorted(lines):
            terminalreporter.write_line(line)


# Under pytest-xdist (make test) the HIP compiles run in worker processes: each worker hands its lines to the
# controller when it finishes, so that the summary above still prints them.
def pytest_sessionfinish(session):
    _stop_prefect_servers_left_running()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["hip_compile_lines"] = json.dumps(session.config.stash.get(HIP_COMPILE_LINES, []))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    # A worker that died (error set) has no workeroutput: say nothing here, so that xdist reports the crash itself.
    lines = json.loads(getattr(node, "workeroutput", {}).get("hip_compile_lines", "[]"))
    node.config.stash.setdefault(HIP_COMPILE_LINES, []).extend(lines)


def _stop_prefect_servers_left_running() -> None:
    """A Prefect API server that a test started without stopping it (Prefect's ephemeral one, started by a flow run
    outside prefect_test_harness) is stopped by Prefect at the interpreter's exit, and its "Stopping temporary
    server" line then went to the stream Prefect's console handler was given: pytest's capture file, closed by
    then ("--- Logging error --- ... ValueError: I/O operation on closed file"). Stopped here, while it is open,
    without that line in the session's summary."""
    server = sys.modules.get("prefect.server.api.server")
    if server is None:
        return
    logger, level = server.subprocess_server_logger, server.subprocess_server_logger.level
    logger.setLevel(logging.WARNING)
    try:
        for instance in list(server.SubprocessASGIServer._instances.values()):
            instance.stop()
    finally:
        logger.setLevel(level)


@pytest.fixture(scope="session")
def shared_prefect_api(tmp_path_factory) -> Iterator[str]:
    """The URL of this test process's shared Prefect API (tests/support/shared_api.py): pass it to a `ksci evolve`
    subprocess with support.shared_api.with_shared_api."""
    api, url = start_shared_api(tmp_path_factory.mktemp("shared-api"))
    try:
        yield url
    finally:
        api.stop()
