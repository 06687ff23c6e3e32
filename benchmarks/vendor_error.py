"""The vendor library's error on every input profile, beside each problem's tolerance and the reference's own error.

Issue 30: a problem's tolerance must follow the vendor, so that a kernel as exact as cuBLASLt passes on every
profile and one that overflows or drops precision fails on the profile that shows it. Per problem, profile and test
shape (one seed, as verification draws the extra profiles) this prints, in units of the expected output's RMS:

- `vendor`: the largest |vendor - reference| (cuBLASLt through torch._scaled_mm for the FP8 GEMMs, as the harness's
  baseline; torch's rms_norm for rmsnorm), and whether the problem's own check passes it (`pass`);
- `need`: the absolute term beyond atol + rtol |ref| the vendor needs, the quantity the tolerance's atol_rms bounds;
- `ref`: the float32 reference's own `need` against a float64 computation (0: its bf16 rounding stays within
  atol + rtol |ref| alone);
- `nan`: non-finite elements in the vendor's output;
- `err/terms`: the vendor's largest |vendor - reference| / (|A||B|^T)_ij (the reference module's `magnitude`, the
  sum of |terms| of each element), and `acc need`: the acc_rtol it needs beyond atol + atol_rms rms + rtol |ref|,
  to hold against the problem's acc_rtol (the summary per profile prints both beside it).

Usage, on a GPU:  python benchmarks/vendor_error.py [--problem fp8_gemm] [--shapes 11] [--json-out FILE]
Exit status 1 when the vendor fails any problem's check on any profile (the tolerance would reject cuBLASLt).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ksci.evaluate.harness.cases import draw
from ksci.evaluate.harness.check import compare
from ksci.evaluate.harness.child import verification_plan
from ksci.problem.spec import load_problem, shape_key

PROBLEMS = ("fp8_gemm", "fp8_gemm_kmajor", "rmsnorm")


def exact(name: str, tensors: dict) -> torch.Tensor:
    """The output in float64 (block sums for the GEMMs), the yardstick of the reference's own error."""
    if name == "rmsnorm":
        x, w = tensors["x"].double(), tensors["weight"].double()
        return x / torch.sqrt(x.square().mean(dim=-1, keepdim=True) + 1e-6) * w
    a, b = tensors["a"].double(), tensors["b"].double()
    a_scale, b_scale = tensors["a_scale"].double(), tensors["b_scale"].double()
    m, k = a.shape
    n = b.shape[0]
    out = torch.zeros(m, n, dtype=torch.float64, device=a.device)
    columns = torch.arange(n, device=a.device) // 128
    for kb in range(k // 128):
        block = slice(kb * 128, (kb + 1) * 128)
        out += (a[:, block] @ b[:, block].T) * a_scale[:, kb : kb + 1] * b_scale[columns, kb][None, :]
    return out


def errors(out: torch.Tensor, ref: torch.Tensor, tolerance, magnitude: torch.Tensor | None = None) -> dict:
    """The largest error and the term it needs, in units of rms(ref) and, where the reference module has a
    `magnitude` (the sum of |terms| of each element, |A||B|^T), as a share of that element's sum: `terms_need` is
    the acc_rtol the output needs beyond atol + atol_rms rms + rtol |ref|."""
    out, ref = out.float(), ref.float()
    rms = float(ref.square().mean().sqrt()) or 1.0
    finite = torch.isfinite(out)
    err = torch.where(finite, (out - ref).abs(), torch.zeros_like(ref))
    excess = (err - tolerance.atol - tolerance.rtol * ref.abs()).clamp(min=0)
    tol = (tolerance.rtol, tolerance.atol, tolerance.atol_rms, tolerance.acc_rtol)
    check = compare(out, ref, *tol, magnitude)
    row = {
        "max_over_rms": float(err.max()) / rms,
        "need_over_rms": float(excess.max()) / rms,
        "nonfinite": int((~finite).sum()),
        "passes": bool(check["ok"]),
        "max_over_terms": None,
        "terms_need": None,
    }
    if magnitude is not None:
        mag = magnitude.float()
        has_terms = mag > 0
        row["max_over_terms"] = float(torch.where(has_terms, err / mag, 0.0).max())
        beyond = (excess - tolerance.atol_rms * rms).clamp(min=0)
        row["terms_need"] = float(torch.where(has_terms, beyond / mag, 0.0).max())
    return row


def measure(name: str, shapes: int, device: torch.device) -> list[dict]:
    problem = load_problem(name)
    ref_mod = problem.reference_module()
    tolerance = problem.tolerance("cuda")
    (output,) = problem.outputs
    rows = []
    for profile, steps in verification_plan(problem):
        for shape in problem.tests[:shapes]:
            tensors = draw(ref_mod, shape, shape["seed"] + steps[0], "cuda", device, profile)
            inputs = {k: v for k, v in tensors.items() if k not in problem.outputs}
            expected = ref_mod.reference(dict(inputs))[output]
            runner = ref_mod.vendor(tensors)
            mag = ref_mod.magnitude(dict(inputs))[output] if hasattr(ref_mod, "magnitude") else None
            vendor = errors(runner()[output], expected, tolerance, mag) if runner else None
            reference = errors(expected, exact(name, inputs), tolerance, mag)
            rows.append(
                {"problem": name, "profile": profile, "shape": shape_key(shape), "tolerance": vars(tolerance)}
                | {"vendor": vendor, "reference": reference}
            )
            if device.type == "cuda":
                torch.cuda.synchronize()
    return rows


def _num(value: float | None) -> str:
    return f"{value:9.2e}" if value is not None else f"{'-':>9s}"


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", action="append", choices=PROBLEMS)
    parser.add_argument("--shapes", type=int, default=99, help="the first N test shapes of each problem")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda", 0)
    rows = [row for name in args.problem or PROBLEMS for row in measure(name, args.shapes, device)]
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print(
        f"{'problem':16s} {'profile':11s} {'shape':16s} {'tolerance':28s} {'vendor':>9s} {'need':>9s} {'nan':>5s}"
        f" {'pass':>5s} {'ref':>9s} {'err/terms':>9s} {'acc need':>9s}"
    )
    failures = 0
    for row in rows:
        t, v, r = row["tolerance"], row["vendor"], row["reference"]
        tol = f"rtol {t['rtol']:g} atol {t['atol']:g} rms {t['atol_rms']:g}"
        if v is None:
            cells = f"{'-':>9s} {'-':>9s} {'-':>5s} {'-':>5s}"
        else:
            failures += not v["passes"]
            cells = f"{v['max_over_rms']:9.2e} {v['need_over_rms']:9.2e} {v['nonfinite']:5d} {str(v['passes']):>5s}"
        terms = f"{_num(v and v['max_over_terms'])} {_num(v and v['terms_need'])}"
        print(
            f"{row['problem']:16s} {row['profile']:11s} {row['shape']:16s} {tol:28s} {cells} {r['max_over_rms']:9.2e}"
            f" {terms}"
        )
    print("\nworst per problem and profile (vendor need / tolerance atol_rms; reference's own error):")
    for key in sorted({(r["problem"], r["profile"]) for r in rows}):
        group = [r for r in rows if (r["problem"], r["profile"]) == key]
        need = max((r["vendor"]["need_over_rms"] for r in group if r["vendor"]), default=float("nan"))
        own = max(r["reference"]["need_over_rms"] for r in group)
        atol_rms = group[0]["tolerance"]["atol_rms"]
        room = f"{atol_rms / need:.1f}x room" if need and atol_rms else "-"
        print(
            f"  {key[0]:16s} {key[1]:11s} vendor needs {need:.2e} x rms (atol_rms {atol_rms:g}: {room}); "
            f"reference needs {own:.2e} x rms"
        )
        ratios = [
            r["vendor"]["max_over_terms"] for r in group if r["vendor"] and r["vendor"]["max_over_terms"] is not None
        ]
        if ratios:
            acc_rtol = group[0]["tolerance"]["acc_rtol"]
            print(
                f"  {'':16s} {'':11s} vendor max |err| / (|A||B|^T)_ij {max(ratios):.2e} (acc_rtol {acc_rtol:g}); "
                f"acc_rtol it needs beyond the other terms {max(r['vendor']['terms_need'] for r in group if r['vendor']):.2e}"
            )
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1))
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
