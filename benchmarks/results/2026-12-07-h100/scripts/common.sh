# Sourced by the GPU-round scripts, from the project root: install the wheels and ksci, name the machine.
set -u
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
mkdir -p $OUT/logs
python3 -m pip install -q --no-index --no-deps .whl/*.whl > $OUT/logs/pip.log 2>&1 || tail -5 $OUT/logs/pip.log
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >> $OUT/logs/pip.log 2>&1 || tail -5 $OUT/logs/pip.log
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | sed 's/^GPU-//' | cut -d- -f1)
KIND=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o "H[0-9][0-9]*" | head -1 | tr A-Z a-z)
M="${KIND:-gpu}-$UUID"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > $OUT/logs/gpu.txt
echo "machine $M $(date -u +%FT%TZ) tree $(cat .dev/gpu/COMMIT 2>/dev/null || echo '?') kernel $(uname -r)"
ldconfig -p | grep -c seccomp | sed 's/^/libseccomp entries: /'
# pack: at most 8 files come back; everything under $OUT/logs goes into one archive at the end
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap pack EXIT
