"""Prefect flows: the one place that spells out the order of the stages."""
