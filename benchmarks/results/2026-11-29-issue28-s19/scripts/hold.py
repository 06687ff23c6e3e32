"""Patch the hopper_fp8 cache's library of a point in place so that every FFMA of a long run holds the warp, or put
the saved original back. Usage: hold.py POINT MODE (MODE: save | hold | restore)."""

import shutil
import sys
from pathlib import Path

from ksci.evaluate.compile import compile_source
from ksci.evaluate.sass import HOLD_BIT, ffma_runs, find_sass_tools, parse_listing, sass_listing
from ksci.evaluate.toolchain import default_arch, find_toolchain
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem

point = {k: int(v) for k, v in (kv.split("=") for kv in sys.argv[1].split(","))}
mode = sys.argv[2]
template = load_problem("fp8_gemm_kmajor").templates[0]
toolchain = find_toolchain("cuda")
source = render_kernel(template, {**template.default, **point})
built = compile_source(source, toolchain, default_arch("cuda"), Path("/tmp/hopper_fp8_cache"))
library = Path(built.library)
original = library.with_name("kernel.orig.so")
if mode == "save":
    shutil.copy(library, original)
    print("saved", library)
    sys.exit()
shutil.copy(original, library)
if mode == "restore":
    sys.exit()
data = bytearray(library.read_bytes())
changed = 0
for function in parse_listing(sass_listing(library, find_sass_tools(toolchain.compiler))):
    for run in ffma_runs(function):
        old = b"".join(x.encoding() for x in run)
        new = b"".join(x.low.to_bytes(8, "little") + (x.high | HOLD_BIT).to_bytes(8, "little") for x in run)
        changed += sum(not x.high & HOLD_BIT for x in run)
        at = data.find(old)
        assert at >= 0, "run not found"
        data[at : at + len(old)] = new
library.write_bytes(bytes(data))
print(mode, "changed", changed)
