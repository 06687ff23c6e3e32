"""Every CUDA seed template's default point on fp8_gemm and fp8_gemm_kmajor, beside cuBLASLt, through ksci's harness.

Each kernel is evaluated as a candidate is (screen, library check, verification, timing with fresh inputs per
call), with the reference and cuBLASLt timed in the same harness process. Per shape: each template's median, the
vendor's, the speed of light; then geomeans and ratios. On fp8_gemm cuBLASLt is handed K-major copies of A and B
made outside its timed call (the candidates get the column-major operands); fp8_gemm_kmajor is like for like.
Usage, on a GPU:

    python benchmarks/fp8_families.py [--problem fp8_gemm_kmajor ...] [--template wgmma ...]
        [--param wgmma:BN=192 ...] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import geomean
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem, shape_key


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", action="append", default=[])
    parser.add_argument("--template", action="append", default=[], help="default: every CUDA template")
    parser.add_argument("--param", action="append", default=[], help="TEMPLATE:KEY=VALUE, an extra point")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    extra: dict[str, dict] = {}
    for item in args.param:
        template, assignment = item.split(":", 1)
        key, value = assignment.split("=", 1)
        extra.setdefault(template, {})[key] = int(value) if value.lstrip("-").isdigit() else value
    records = []
    for name in args.problem or ["fp8_gemm_kmajor", "fp8_gemm"]:
        problem = load_problem(name)
        kernels = {}
        for spec in problem.templates_for("cuda"):
            if args.template and spec.name not in args.template:
                continue
            kernels[f"{spec.name}"] = render_kernel(spec)
            if spec.name in extra:
                label = ",".join(f"{k}={v}" for k, v in extra[spec.name].items())
                kernels[f"{spec.name}[{label}]"] = render_kernel(spec, {**spec.default, **extra[spec.name]})
        verdicts = {}
        for label, source in kernels.items():
            verdict = evaluate_source(problem, source, EvaluationOptions(target="cuda"))
            verdicts[label] = verdict
            print(f"{name} {label}: {verdict.status} {verdict.message[:160]}", flush=True)
        ok = {k: v for k, v in verdicts.items() if str(v.status) == "ok"}
        if not ok:
            continue
        first = next(iter(ok.values()))
        print(f"\n{name} on {first.fingerprint.get('gpu')} (us; median of each shape)")
        print(f"{'shape':18s}" + "".join(f"{k[:16]:>17s}" for k in ok) + f"{'cuBLASLt':>10s}{'SoL':>8s}")
        for i, timing in enumerate(first.timings):
            row = [v.timings[i].kernel.median_us for v in ok.values()]
            vendor = timing.vendor.median_us if timing.vendor else float("nan")
            sol = timing.speed_of_light_us or float("nan")
            print(f"{shape_key(timing.shape):18s}" + "".join(f"{t:17.2f}" for t in row) + f"{vendor:10.2f}{sol:8.2f}")
        vendors = [geomean([s.vendor.median_us if s.vendor else None for s in v.timings]) for v in ok.values()]
        vendor_geo = geomean([x for x in vendors if x]) if any(vendors) else None
        print(
            f"{'geomean':18s}"
            + "".join(f"{v.geomean_us:17.2f}" for v in ok.values())
            + f"{vendor_geo or float('nan'):10.2f}{first.speed_of_light_geomean_us or float('nan'):8.2f}"
        )
        if vendor_geo:
            print(f"{'x cuBLASLt':18s}" + "".join(f"{v.geomean_us / vendor_geo:17.2f}" for v in ok.values()))
        for label, verdict in verdicts.items():
            records.append(
                {
                    "problem": name,
                    "kernel": label,
                    "status": str(verdict.status),
                    "geomean_us": verdict.geomean_us,
                    "vendor_geomean_us": verdict.vendor_geomean_us,
                    "speed_of_light_geomean_us": verdict.speed_of_light_geomean_us,
                    "per_shape": {
                        shape_key(s.shape): {
                            "kernel": s.kernel.median_us if s.kernel else None,
                            "vendor": s.vendor.median_us if s.vendor else None,
                            "sol": s.speed_of_light_us,
                        }
                        for s in verdict.timings
                    },
                    "fingerprint": verdict.fingerprint,
                }
            )
    if args.json_out:
        args.json_out.write_text(json.dumps(records, indent=1, default=str))


if __name__ == "__main__":
    main()
