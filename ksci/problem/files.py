"""Which files a problem folder may give: those whose real path (every symbolic link followed) lies inside the
folder, or inside another problem's folder beside it (the shipped fp8_gemm and fp8_gemm_kmajor share their core
templates through links). A link anywhere else (to /etc/passwd, to a user's ~/.env) is refused: what a problem
folder holds renders into kernels, compile logs and the LLM's prompts."""

from __future__ import annotations

import os
import re
from pathlib import Path

# The most entries a problem folder is walked for (a folder of sources, not a data set): bounds the check's cost.
MAX_WALKED = 10_000


def leads_outside(root: Path, path: Path) -> bool:
    """Whether `path` (a file or folder at or under the problem folder `root`) resolves to a place a problem may not
    give: outside `root` and outside every sibling problem's folder."""
    real, home = path.resolve(), root.resolve()
    if real.is_relative_to(home):
        return False
    shelf = home.parent
    if not real.is_relative_to(shelf) or real == shelf:
        return True
    parts = real.relative_to(shelf).parts
    return len(parts) < 2 or not (shelf / parts[0] / "problem.yaml").is_file()


def outside_link(root: Path) -> str | None:
    """Why the folder `root` may not be read (the first link under it, none followed, that leads outside; or more
    than MAX_WALKED entries), else None."""
    walked = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs) + sorted(files):
            path = Path(folder) / name
            if path.is_symlink() and leads_outside(root, path):
                return f"{path.relative_to(root)} is a link that leads outside the problem folder"
        walked += len(dirs) + len(files)
        if walked > MAX_WALKED:
            return f"more than {MAX_WALKED} files and folders (a problem folder holds sources, not data)"
    return None


# `from ksci.problem import NAME` or `from ksci.problem.NAME import ...` at the start of a line of reference.py.
_SHARED_IMPORT = re.compile(r"^from ksci\.problem(?: import (\w+)|\.(\w+) import)", re.MULTILINE)


def reference_support(reference_text: str) -> list[Path]:
    """The modules of ksci/problem/ that a reference.py imports (code that two problems share, such as
    fp8_block_scaled.py): the LLM reads them after it, and an exported package carries them beside it."""
    here = Path(__file__).parent
    names = dict.fromkeys(a or b for a, b in _SHARED_IMPORT.findall(reference_text))
    return [here / f"{name}.py" for name in names if (here / f"{name}.py").is_file()]
