#!/bin/bash
# The device call of 2026-11-25 (third session), as run from the repository root (it was .exp/run1.sh, beside
# .whl/, the offline wheelhouse of docs/dependencies.md): A/B of template variants on the K-major problem, and ncu
# of the default. .exp/v1 held the wgmma template of 37bdfee, .exp/v2 the same plus variant-ordered-issue.patch;
# "cur" was the template before 37bdfee.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $OUT/gpu.txt 2>&1
git log -1 --format=%H > $OUT/commit.txt 2>/dev/null
B="python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor"
timeout 150 $B --point "" --point EPI=0 --point STAGES=6,EPI=0 --point STAGES=4 --out $OUT/cur > $OUT/cur.txt 2>&1; echo "cur rc=$?"
timeout 150 $B --template-dir .exp/v1 --point "" --point STAGES=6,EPI=0 --out $OUT/v1 > $OUT/v1.txt 2>&1; echo "v1 rc=$?"
timeout 150 $B --template-dir .exp/v2 --point "" --point STAGES=6,EPI=0 --out $OUT/v2 > $OUT/v2.txt 2>&1; echo "v2 rc=$?"
for v in cur v1; do
  td=""; [ $v != cur ] && td="--template-dir .exp/$v"
  timeout 120 ncu --set full --import-source yes --clock-control none -k regex:fp8_gemm_wgmma -c 1 -o $OUT/ncu_$v \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor $td --profile 6144,4608,7168 --out /tmp/prof_$v > $OUT/ncu_$v.log 2>&1
  echo "ncu $v rc=$?"
  ncu -i $OUT/ncu_$v.ncu-rep --page details --csv > $OUT/ncu_${v}_details.csv 2>&1
  ncu -i $OUT/ncu_$v.ncu-rep --page raw --csv > $OUT/ncu_${v}_raw.csv 2>&1
  ncu -i $OUT/ncu_$v.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${v}_source.csv 2>&1
done
grep -h -A 25 "^== " $OUT/cur.txt $OUT/v1.txt $OUT/v2.txt
ls -la $OUT
