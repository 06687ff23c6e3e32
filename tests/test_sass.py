"""The SASS edit of `// ksci: interleave-ffma N/16` (ksci/evaluate/toolchain/sass.py): which FFMAs it finds and changes, which
bits it clears, that it edits the library's bytes and nothing else, and how it fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksci.evaluate.toolchain import compile as compile_module
from ksci.evaluate.toolchain.compile import compile_source
from ksci.evaluate.toolchain.sass import (
    HOLD_BIT,
    MIN_RUN,
    REUSE_BITS,
    Instruction,
    SassError,
    edit_library,
    ffma_runs,
    find_sass_tools,
    interleaved,
    parse_listing,
    requested_sixteenths,
    sass_listing,
)
from ksci.evaluate.toolchain.toolchains import find_toolchain

# Encodings as ptxas wrote them for sm_90a (nvcc 13.0): an FFMA whose operand b is marked .reuse (so it also holds the
# scheduler on its warp), the FFMA after it that reads that operand, and an ISETP.
REUSING = (0x0000008719847223, 0x080FE20000000084)
PLAIN = (0x0000008718657223, 0x000FC20000000065)
ISETP = (0x0000000400007C0C, 0x000FE2000BF03270)


def _listing(functions: dict[str, list[tuple[str, tuple[int, int]]]]) -> str:
    """A `cuobjdump -sass` listing of these functions (instruction text, encoding)."""
    lines = ["", "Fatbin elf code:", "================", "arch = sm_90a", "", "\tcode for sm_90a"]
    for name, body in functions.items():
        lines.append(f"\t\tFunction : {name}")
        for i, (text, (low, high)) in enumerate(body):
            lines.append(f"        /*{16 * i:04x}*/                   {text} ;       /* {low:#018x} */")
            lines.append(f"                                                          /* {high:#018x} */")
    return "\n".join(lines) + "\n"


def _promotion(pairs: int) -> list[tuple[str, tuple[int, int]]]:
    body = [("ISETP.LE.AND P0, PT, R0, UR4, PT", ISETP)]
    for _ in range(pairs):
        body += [("FFMA R132, R25, R135.reuse, R132", REUSING), ("FFMA R101, R24, R135, R101", PLAIN)]
    return body + [("ISETP.LE.AND P0, PT, R0, UR4, PT", ISETP)]


def _bytes(body: list[tuple[str, tuple[int, int]]]) -> bytes:
    return b"".join(low.to_bytes(8, "little") + high.to_bytes(8, "little") for _, (low, high) in body)


def test_the_directive_is_read_and_checked():
    assert requested_sixteenths("__global__ void k() {}") == 0
    assert requested_sixteenths("// x\n  // ksci: interleave-ffma 9/16\nint x;") == 9
    assert requested_sixteenths("// ksci: interleave-ffma 16/16\n// ksci: interleave-ffma 16/16\n") == 16
    for bad in ("// ksci: interleave-ffma 0/16\n", "// ksci: interleave-ffma 17/16\n"):
        with pytest.raises(ValueError, match="from 1 to 16"):
            requested_sixteenths(bad)
    with pytest.raises(ValueError, match=r"found \[8, 9\]"):
        requested_sixteenths("// ksci: interleave-ffma 9/16\n// ksci: interleave-ffma 8/16\n")
    assert requested_sixteenths("x = 1; // ksci: interleave-ffma 9/16\n") == 0  # only a line of its own


def test_runs_are_found_per_function_and_short_ones_left_alone():
    listing = _listing({"long": _promotion(MIN_RUN // 2), "short": _promotion(MIN_RUN // 2 - 1)})
    functions = parse_listing(listing)
    assert [len(f) for f in functions] == [MIN_RUN + 2, MIN_RUN]
    assert functions[0][1] == Instruction(16, "FFMA R132, R25, R135.reuse, R132", *REUSING)
    runs = [ffma_runs(f) for f in functions]
    assert [len(r) for r in runs[0]] == [MIN_RUN] and runs[1] == []


def test_the_first_sixteenths_lose_reuse_and_hold_and_nothing_else_changes():
    run = parse_listing(_listing({"k": _promotion(16)}))[0][1:-1]  # 32 FFMAs
    edited = interleaved(run, 9)
    cut = 32 * 9 // 16  # 18
    for before, after in zip(run[:cut], edited[:cut], strict=True):
        assert after.high & (REUSE_BITS | HOLD_BIT) == 0
        assert after.high | (before.high & (REUSE_BITS | HOLD_BIT)) == before.high  # only those bits cleared
        assert after.low == before.low and ".reuse" not in after.text
    assert edited[cut:] == run[cut:]
    assert interleaved(run, 16)[-1].high == PLAIN[1]  # the last FFMA was already plain


def test_the_library_bytes_are_edited_where_the_run_is_and_only_there():
    body = _promotion(16)
    listing = _listing({"k": body})
    prefix, code = b"\x7fELF" + bytes(60), _bytes(body)
    data = bytearray(prefix + code + b"tail" + code)  # the same code twice (two cubins)
    report = edit_library(data, listing, 16)
    assert (report.runs, report.ffmas, report.changed) == (1, 32, 16)
    # the reusing FFMA's control bits become those ptxas gives the plain one (0x000fc2...), its operands stay
    unreused = (REUSING[0], 0x000FC20000000084)
    expected = _bytes([(t, unreused if e == REUSING else e) for t, e in body])
    assert bytes(data) == prefix + expected + b"tail" + expected
    assert "16 of the 32 FFMAs in 1 runs" in report.describe(16)


def test_the_same_run_in_two_functions_is_edited_once_everywhere():
    body = _promotion(16)
    listing = _listing({"k1": body, "k2": body})
    data = bytearray(b"\x7fELF" + _bytes(body) + b"\0" * 7 + _bytes(body))
    report = edit_library(data, listing, 16)
    assert (report.runs, report.ffmas, report.changed) == (2, 64, 32)
    assert data.count(bytes(_bytes(body))) == 0 and data.count(REUSING[1].to_bytes(8, "little")) == 0


def test_a_run_missing_from_the_bytes_is_an_error():
    listing = _listing({"k": _promotion(16)})
    with pytest.raises(SassError, match="not in the library's bytes"):
        edit_library(bytearray(b"\x7fELF" + bytes(500)), listing, 9)


def test_a_listing_without_high_words_is_an_error():
    listing = _listing({"k": _promotion(8)}).replace("/* 0x080fe20000000084 */", "")
    with pytest.raises(SassError, match="no high word"):
        parse_listing(listing)


# A kernel whose loop is one long run of FFMAs sharing an operand (ptxas marks it .reuse), as a promotion is.
PROMOTE_KERNEL = """// ksci: interleave-ffma 9/16
extern "C" __global__ void promote(float* acc, const float* t, const float* scale, int n) {
    float a[32], b[32];
    const int base = threadIdx.x * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) { a[i] = acc[base + i]; b[i] = t[base + i]; }
    const float s = scale[threadIdx.x];
    for (int r = 0; r < n; ++r) {
#pragma unroll
        for (int i = 0; i < 32; ++i) a[i] = fmaf(b[i], s, a[i]);
#pragma unroll
        for (int i = 0; i < 32; ++i) b[i] = b[i] * 0.5f + 1.0f;
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[base + i] = a[i];
}
"""


def _nvcc_and_sass_tools():
    toolchain = find_toolchain("cuda")
    return toolchain, find_sass_tools(toolchain.compiler)


@pytest.mark.nvcc
@pytest.mark.cuobjdump
def test_a_built_library_gets_the_edit_and_keeps_its_instructions(tmp_path: Path):
    toolchain, tools = _nvcc_and_sass_tools()
    edited = compile_source(PROMOTE_KERNEL, toolchain, "sm_90a", tmp_path / "a")
    unedited = PROMOTE_KERNEL.replace("// ksci: interleave-ffma 9/16", "// as ptxas wrote it")
    plain = compile_source(unedited, toolchain, "sm_90a", tmp_path / "b")
    assert edited.ok and plain.ok, edited.log[-1500:]
    assert "interleave-ffma 9/16:" in edited.log and "interleave-ffma" not in plain.log
    after, before = (parse_listing(sass_listing(Path(r.library), tools))[0] for r in (edited, plain))
    assert [x.text.replace(".reuse", "") for x in after] == [x.text.replace(".reuse", "") for x in before]
    assert [x.low for x in after] == [x.low for x in before]
    runs_after, runs_before = ffma_runs(after), ffma_runs(before)
    assert runs_before and sum(bool(x.high & REUSE_BITS) for r in runs_before for x in r) > 0
    for run_after, run_before in zip(runs_after, runs_before, strict=True):
        cut = len(run_before) * 9 // 16
        assert all(x.high & (REUSE_BITS | HOLD_BIT) == 0 for x in run_after[:cut])
        assert run_after[cut:] == run_before[cut:]


@pytest.mark.nvcc
@pytest.mark.cuobjdump
def test_without_cuobjdump_the_build_fails_and_says_what_to_install(tmp_path: Path, monkeypatch):
    toolchain, _ = _nvcc_and_sass_tools()
    monkeypatch.setattr("ksci.evaluate.toolchain.sass._which", lambda tool: None)
    monkeypatch.setattr("ksci.evaluate.toolchain.sass._beside", lambda folder, tool: None)
    monkeypatch.setattr("ksci.evaluate.toolchain.sass._from_wheel", lambda tool: None)
    result = compile_source(PROMOTE_KERNEL, toolchain, "sm_90a", tmp_path)
    assert not result.ok and result.library is None
    assert "needs cuobjdump and nvdisasm" in result.log
    assert list(tmp_path.iterdir()) == []  # nothing cached: once they are installed, the same source builds
    monkeypatch.undo()
    assert compile_source(PROMOTE_KERNEL, toolchain, "sm_90a", tmp_path).ok


def test_a_new_edit_rule_is_a_new_cache_key(monkeypatch):
    toolchain = compile_module.Toolchain("cuda", "/usr/bin/nvcc", "nvcc 13.0")
    asking, plain = "// ksci: interleave-ffma 9/16\n", "int x;\n"
    keys = [compile_module.cache_key(s, toolchain, "sm_90a", ()) for s in (asking, plain)]
    monkeypatch.setattr(compile_module, "SASS_EDIT_VERSION", "interleave-ffma 2")
    assert compile_module.cache_key(asking, toolchain, "sm_90a", ()) != keys[0]
    assert compile_module.cache_key(plain, toolchain, "sm_90a", ()) == keys[1]  # other sources keep their builds


@pytest.mark.nvcc
@pytest.mark.cuobjdump
def test_cuobjdump_reads_the_candidate_library_in_the_compilers_sandbox(tmp_path: Path, monkeypatch):
    toolchain, tools = _nvcc_and_sass_tools()
    wrapped: list[tuple[list[str], tuple, bool]] = []
    real = compile_module.sandboxed

    def recording(command, work, toolchain, tools=(), search_path=None, proc=False):
        wrapped.append((command, tools, proc))
        return real(command, work, toolchain, tools, search_path, proc)

    monkeypatch.setattr(compile_module, "sandboxed", recording)
    assert compile_source(PROMOTE_KERNEL, toolchain, "sm_90a", tmp_path).ok
    (nvcc, _, _), (cuobjdump, bound, proc) = wrapped
    assert nvcc[0] == toolchain.compiler
    assert cuobjdump[:2] == [tools.cuobjdump, "-sass"] and cuobjdump[2].endswith("kernel.so")
    assert set(tools.paths()) <= set(bound) and proc
