"""Headless Chromium for the tests: kept off the network, as root (hence --no-sandbox), a throwaway profile."""

from __future__ import annotations

import subprocess
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    command = ["chromium", *FLAGS, f"--user-data-dir={profile}", *extra, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def screenshot(url: str, png: Path, profile: Path, size: str = "1400,3000") -> subprocess.CompletedProcess:
    return chromium(url, profile, f"--window-size={size}", f"--screenshot={png}")


def rendered_dom(url: str, profile: Path, budget_ms: int = 25000) -> str:
    """The page's DOM after its scripts ran (a single-page app such as Prefect's UI needs the time budget)."""
    return chromium(url, profile, f"--virtual-time-budget={budget_ms}", "--dump-dom").stdout
