"""The simulator's made-up timings: a plausible cost model over a template point's parameters and a shape.

NOTHING HERE IS A MEASUREMENT. The model stands for a Hopper-class GPU (132 SMs, about 1,500 TFLOP/s of FP8 and
3 TB/s of memory) so that a simulated tuning run has a landscape to learn, with the shape of the real one:
- the family sets how near the peak its inner loop gets (naive far, mma/mfma halfway, wgmma/mfma_fp8 near);
- the tile (BM x BN, or the block's threads) sets the reuse of each loaded byte, the padding of the last tile
  and the number of tiles, which fill the SMs in waves (a last wave half full costs a whole wave);
- SPLIT_K multiplies the tiles (more waves to fill on a small problem) and adds a reduction;
- STAGES hide the loads' latency (STAGES / (STAGES + 1)) until the stages no longer fit in shared memory;
- warps (WARPS_M x WARPS_N, CONSUMERS, WAVES_*, THREADS) keep the tensor cores fed, up to a point;
- every other parameter value has a fixed made-up effect of a few percent, which a tuner can learn one at a time;
- a shape that needs less time than its bytes take from memory is memory-bound; each launch costs 3 us.
A point's time per shape also carries a fixed made-up noise of +-2%, so that ties are rare.
"""

from __future__ import annotations

import hashlib
import math

SMS = 132
PEAK_FLOPS = 1.5e15
BANDWIDTH = 3.0e12
LAUNCH_US = 3.0
SHARED_BYTES = 227 * 1024
FAMILY = {"naive": 0.04, "mma": 0.35, "mfma": 0.35, "vectorized": 0.75, "wgmma": 0.8, "mfma_fp8": 0.8}
MODELLED = {"BM", "BN", "BLOCK_X", "BLOCK_Y", "SPLIT_K", "STAGES", "WARPS_M", "WARPS_N", "WAVES_M", "WAVES_N"}
MODELLED |= {"CONSUMERS", "THREADS", "ROWS_PER_BLOCK"}


def unit(text: str) -> float:
    """A number in [0, 1] that depends only on the text."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:6], 16) / 0xFFFFFF


def point_time_us(template: str, params: dict, shape: dict) -> float:
    """The made-up time of one template point on one shape, in microseconds."""
    dims = {k: int(v) for k, v in shape.items() if k != "seed" and isinstance(v, int)}
    if {"m", "n", "k"} <= dims.keys():
        busy_us = _gemm_us(template, params, dims["m"], dims["n"], dims["k"])
        moved = dims["m"] * dims["k"] + dims["n"] * dims["k"] + 2 * dims["m"] * dims["n"]
    else:
        busy_us = _rows_us(template, params, dims)
        moved = 4 * math.prod(dims.values())
    memory_us = moved / BANDWIDTH * 1e6
    noise = 0.98 + 0.04 * unit(f"{template}\0{sorted(params.items())}\0{sorted(dims.items())}")
    return (max(busy_us, memory_us) * _other_effects(template, params) + LAUNCH_US) * noise


def _gemm_us(template: str, params: dict, m: int, n: int, k: int) -> float:
    tile_m = int(params.get("BM", params.get("BLOCK_Y", 64)))
    tile_n = int(params.get("BN", params.get("BLOCK_X", 64)))
    split = int(params.get("SPLIT_K", 1))
    tiles = math.ceil(m / tile_m) * math.ceil(n / tile_n) * split
    padded = (math.ceil(m / tile_m) * tile_m / m) * (math.ceil(n / tile_n) * tile_n / n)
    reuse = min(1.0, (tile_m * tile_n / (tile_m + tile_n)) / 64) ** 0.5  # 128 x 128 reuses fully
    stages = int(params.get("STAGES", 2))
    stage_bytes = (tile_m + tile_n) * 128  # one 128-deep K slice of A and B, FP8
    pipeline = stages / (stages + 1) if stages * stage_bytes <= SHARED_BYTES else 0.3
    per_sm = max(1, min(4, SHARED_BYTES // max(stages * stage_bytes, 1)))
    efficiency = FAMILY.get(template, 0.5) * reuse * pipeline * _warps(params) * _waves(tiles, per_sm)
    reduction_us = (split - 1) * m * n * 4 * 2 / BANDWIDTH * 1e6
    return 2 * m * n * k * padded / (PEAK_FLOPS * efficiency) * 1e6 + reduction_us


def _rows_us(template: str, params: dict, dims: dict) -> float:
    """A row-wise kernel (rmsnorm): memory-bound when each block has enough threads and rows to fill the SMs."""
    rows = dims.get("rows", next(iter(dims.values()), 1))
    per_block = int(params.get("ROWS_PER_BLOCK", 1))
    blocks = math.ceil(rows / per_block)
    efficiency = FAMILY.get(template, 0.5) * _warps(params) * _waves(blocks, 8)
    return 4 * math.prod(dims.values()) / (BANDWIDTH * efficiency) * 1e6


def _warps(params: dict) -> float:
    """How well the warps keep the units fed: 8 warps (or 2 consumer warpgroups) fully; fewer or far more, less."""
    if "CONSUMERS" in params:
        return {1: 0.7, 2: 1.0, 3: 0.93}.get(int(params["CONSUMERS"]), 0.8)
    warps = int(params.get("WARPS_M", params.get("WAVES_M", 1))) * int(params.get("WARPS_N", params.get("WAVES_N", 1)))
    if "THREADS" in params:
        warps = int(params["THREADS"]) // 32
    elif "BLOCK_X" in params:
        warps = int(params["BLOCK_X"]) * int(params.get("BLOCK_Y", 1)) // 32
    return min(1.0, (warps / 8) ** 0.4) * (0.9 if warps > 16 else 1.0)


def _waves(tiles: int, per_sm: int) -> float:
    """The share of the SMs' slots busy over the waves the tiles need (a last wave half full wastes half a wave)."""
    slots = SMS * per_sm
    return tiles / (math.ceil(tiles / slots) * slots) if tiles < 4 * slots else 0.97


def _other_effects(template: str, params: dict) -> float:
    """Each value of a parameter the model does not describe: a fixed made-up factor between 0.9 and 1.1."""
    factor = 1.0
    for name, value in sorted(params.items()):
        if name not in MODELLED:
            factor *= 0.9 + 0.2 * unit(f"{template}\0{name}={value}")
    return factor
