"""Kernel Scientist core: plain Python, no Prefect. One module per pipeline stage."""

from pathlib import Path

__version__ = "0.1.0"

PROJECT_ROOT = Path(__file__).resolve().parent.parent
