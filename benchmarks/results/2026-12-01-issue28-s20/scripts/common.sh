# Sourced by the device scripts, from the project root: install the wheels and ksci, name the machine.
set -u
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q --no-index --no-deps .whl/*.whl > $OUT/pip.log 2>&1 || tail -5 $OUT/pip.log
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >> $OUT/pip.log 2>&1 || tail -5 $OUT/pip.log
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | sed 's/^GPU-//' | cut -d- -f1)
KIND=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o "H[0-9][0-9]*" | head -1 | tr A-Z a-z)
M="${KIND:-gpu}-$UUID"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > $OUT/$M-gpu.txt
echo "machine $M $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
