"""Helpers shared by the tasks of this folder (gpu-mode reference-kernels style, one folder up from each task): the
importer runs this file, keeps a copy beside the source and replaces its comparisons by recorders of the tolerance."""

import torch


def match_reference(data, output, reference, rtol=1e-05, atol=1e-08):
    expected = reference(data)
    if torch.allclose(output.float(), expected.float(), rtol=rtol, atol=atol):
        return True, ""
    return False, f"mismatch beyond rtol={rtol}, atol={atol}"


def make_match_reference(reference, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)

    return wrapped
