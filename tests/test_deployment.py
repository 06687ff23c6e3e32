"""prefect.yaml end to end on loopback: server, work pool, deploy, worker, a triggered run (simulator)."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_deployment_run_of_evolve_completes():
    out = subprocess.run(
        ["bash", "scripts/check_deployment.sh", "4247"], cwd=ROOT, capture_output=True, text=True, timeout=1500
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Completed" in out.stdout and "the deployed run recorded 6 candidates" in out.stdout
