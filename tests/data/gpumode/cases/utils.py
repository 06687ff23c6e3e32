"""Helpers shared by the tasks of this folder, one folder up from each task as gpu-mode keeps them. The importer
runs this file and replaces its comparisons by recorders of the tolerance they are called with."""

import torch


def verbose_allclose(received, expected, rtol=1e-05, atol=1e-08, max_print=5):
    bad = ~torch.isclose(received.float(), expected.float(), rtol=rtol, atol=atol)
    return [f"{int(bad.sum())} mismatches"] if bad.any() else []


def verbose_allequal(received, expected, max_print=5):
    return [] if torch.equal(received, expected) else ["not equal"]


def make_match_reference(reference, **kwargs):
    def wrapped(data, output):
        reasons = verbose_allclose(output, reference(data), **kwargs)
        return not reasons, " ".join(reasons)

    return wrapped


class DeterministicContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
