"""Points drawn uniformly from a template's whole parameter product without listing it: fp8_gemm's product has 13
million points, and a list of them took about 6 GB and 45 s in every xdist worker at collection (the OOM killer took
one worker at the start of each CI run of 2026-11-29)."""

from __future__ import annotations

import math
import random


def uniform_points(template, count: int, seed: str) -> list[dict]:
    """count distinct points other than the template's default (fewer where the product is smaller), each value of each
    parameter drawn uniformly and independently, so each point of the product is as likely; constraints are not
    applied (the tests skip what the template refuses)."""
    rng = random.Random(seed)
    size = math.prod(len(values) for values in template.params.values())
    points: list[dict] = []
    while len(points) < min(count, size - 1):
        point = {k: rng.choice(values) for k, values in template.params.items()}
        if point != template.default and point not in points:
            points.append(point)
    return points
