"""The per-GPU global concurrency limit: one benchmark at a time on each GPU."""

from __future__ import annotations

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.exceptions import ObjectNotFound


def gpu_limit_name(gpu: str) -> str:
    return f"ksci-gpu-{gpu}"


def ensure_gpu_limit(gpu: str) -> None:
    """Create the limit if it does not exist; `strict=True` users fail loudly without it."""
    name = gpu_limit_name(gpu)
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
