"""Speed of light: the fastest a shape can run on a device, from datasheet peaks.

time >= max(flops / peak_rate, bytes / bandwidth). A measured time under it means the measurement,
not the kernel, is broken, so such a result is "suspicious" and never "ok".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeaks:
    name: str
    tflops: dict[str, float]  # dense (no sparsity) rate per compute unit: fp8, bf16, fp32
    bandwidth_tbs: float


# Vendor datasheet numbers (dense). Matched against the GPU's name, most specific first.
DEVICES: tuple[tuple[str, DevicePeaks], ...] = (
    ("H100 PCIe", DevicePeaks("H100 PCIe", {"fp8": 1513.0, "bf16": 756.0, "fp32": 51.0}, 2.0)),
    ("H100", DevicePeaks("H100 SXM", {"fp8": 1979.0, "bf16": 989.0, "fp32": 67.0}, 3.35)),
    ("H200", DevicePeaks("H200 SXM", {"fp8": 1979.0, "bf16": 989.0, "fp32": 67.0}, 4.8)),
    ("MI300X", DevicePeaks("MI300X", {"fp8": 2614.9, "bf16": 1307.4, "fp32": 163.4}, 5.3)),
    ("MI325X", DevicePeaks("MI325X", {"fp8": 2614.9, "bf16": 1307.4, "fp32": 163.4}, 6.0)),
    ("MI355X", DevicePeaks("MI355X", {"fp8": 5033.0, "bf16": 2516.0, "fp32": 157.3}, 8.0)),
)


def peaks_for(gpu_name: str) -> DevicePeaks | None:
    for key, peaks in DEVICES:
        if key.lower() in gpu_name.lower():
            return peaks
    return None


def speed_of_light_us(flops: float, bytes_moved: float, peaks: DevicePeaks, compute: str) -> float:
    compute_s = flops / (peaks.tflops[compute] * 1e12)
    memory_s = bytes_moved / (peaks.bandwidth_tbs * 1e12)
    return max(compute_s, memory_s) * 1e6
