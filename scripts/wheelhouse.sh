#!/usr/bin/env bash
# Build .whl/, a folder of wheels for a GPU host without network (Python 3.12, x86-64). --no-deps: the lock is
# already complete, and a resolving download fails on its certifi override.
# Usage, from the project root:  scripts/wheelhouse.sh -r requirements.lock   (any pip requirement arguments)
# Then, on the GPU host:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl   and   PYTHONPATH=/tmp/site:$PWD
# Packages that a GPU host with torch already has (torch, numpy, pandas, pyarrow, jinja2, ...) are dropped to keep
# the folder small; if pip on the host asks for one of them at another version, relax the pin or keep that wheel.
set -euo pipefail
mkdir -p .git/info; grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
  -d .whl "$@"
cd .whl
# Exact names (a prefix would also drop e.g. jinja2_humanize_extension, which the host lacks).
for big in numpy torch triton pandas pyarrow scipy sympy networkx jinja2 markupsafe; do
  rm -f "$big"-[0-9]*.whl
done
rm -f nvidia_*.whl
du -sh . | sed 's/^/wheelhouse size: /'
