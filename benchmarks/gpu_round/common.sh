# Sourced by the stages of benchmarks/gpu_round/run.sh, from the project root on the GPU host: install the carried
# wheels (.whl/, `bash ../shared/offline-gpu/wheelhouse.sh -r requirements.lock` on a machine with network) and ksci,
# name the machine, and pack everything under $OUT/logs into one archive at the end (a device call returns at most
# 8 files).
set -u
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p "$OUT/logs"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps .whl/*.whl > "$OUT/logs/pip.log" 2>&1 || tail -5 "$OUT/logs/pip.log"
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >> "$OUT/logs/pip.log" 2>&1 ||
  tail -5 "$OUT/logs/pip.log"
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | sed 's/^GPU-//' | cut -d- -f1)
KIND=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o "H[0-9][0-9]*" | head -1 | tr A-Z a-z)
MACHINE="${KIND:-gpu}-$UUID"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > "$OUT/logs/gpu.txt"
echo "machine $MACHINE $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || cat .gpu-carry/COMMIT 2>/dev/null || echo '?') kernel $(uname -r)"
pack() { tar czf "$OUT/logs.tgz" -C "$OUT" logs; }
trap pack EXIT
