"""Prefect tasks: one thin wrapper per pipeline stage. The decorators carry only orchestration."""
