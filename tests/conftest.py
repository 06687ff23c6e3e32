"""Markers: GPU tests skip without a GPU; tool tests skip without the tool (CI installs nvcc, hipcc, chromium)."""

from __future__ import annotations

import os
import shutil

import pytest

from ksci.evaluate import gpu_visible


def pytest_collection_modifyitems(config, items):
    skips = {
        "gpu": None if gpu_visible("cuda") or gpu_visible("rocm") else "no GPU on this machine",
        "nvcc": None if shutil.which("nvcc") else "nvcc is not installed",
        "hipcc": None if shutil.which("hipcc") else "hipcc is not installed (apt-get install hipcc)",
        "chromium": None if shutil.which("chromium") else "chromium is not installed (apt-get install chromium)",
    }
    # CI sets KSCI_REQUIRE_TOOLCHAINS=1: there a missing compiler fails the run instead of skipping its checks.
    required = os.environ.get("KSCI_REQUIRE_TOOLCHAINS") == "1"
    for item in items:
        for marker, reason in skips.items():
            if reason and marker in item.keywords:
                if required and marker in ("nvcc", "hipcc", "chromium"):
                    raise pytest.UsageError(f"KSCI_REQUIRE_TOOLCHAINS=1 but {reason}")
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def gpu_target() -> str:
    return "cuda" if gpu_visible("cuda") else "rocm"
