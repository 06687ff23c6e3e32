"""Writes tests/data/mfma_layouts.json: where each element of an MFMA instruction's A, B and D matrices lives
(lane, register, byte), as AMD's Matrix Instruction Calculator prints it. The CPU emulator of the HIP templates
(tests/support/hip_cpu, tests/test_hip_emulated.py) reads these tables, so that it models the instructions from
AMD's own description, not from the templates' comments.

    git clone https://github.com/ROCm/amd_matrix_instruction_calculator CALC   # pip install tabulate
    python tests/support/make_mfma_layouts.py CALC > tests/data/mfma_layouts.json
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

INSTRUCTIONS = ("v_mfma_f32_32x32x16_fp8_fp8", "v_mfma_f32_16x16x32_fp8_fp8")
ENTRY = re.compile(r"v(\d+)\{(\d+)\}(?:\.\[(\d+):(\d+)\])?")


def layout(calculator: Path, instruction: str, matrix: str) -> list[list[list[int]]]:
    """matrix[row][col] = [lane, register, byte] (byte 0 for 32-bit elements), from --register-layout."""
    argv = [sys.executable, str(calculator / "matrix_calculator.py"), "-a", "CDNA3", "-i", instruction]
    text = subprocess.run([*argv, f"-{matrix}", "--register-layout"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        entries = []
        for cell in cells[1:]:
            found = ENTRY.fullmatch(cell)
            if not found:
                raise ValueError(f"{instruction} {matrix}: unexpected cell {cell!r}")
            register, lane, low = int(found[1]), int(found[2]), int(found[4] or 0)
            entries.append([lane, register, low // 8])
        rows.append(entries)
    return rows


def main() -> None:
    calculator = Path(sys.argv[1])
    commit = subprocess.run(["git", "-C", str(calculator), "rev-parse", "HEAD"], capture_output=True, text=True)
    out = {
        "source": "AMD Matrix Instruction Calculator (github.com/ROCm/amd_matrix_instruction_calculator), -a CDNA3 "
        "-i INSTRUCTION -A/-B/-D --register-layout; each element: [lane, register, byte]",
        "calculator_commit": commit.stdout.strip() or "unknown",
        "instructions": {i: {m: layout(calculator, i, m) for m in ("A", "B", "D")} for i in INSTRUCTIONS},
    }
    json.dump(out, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
