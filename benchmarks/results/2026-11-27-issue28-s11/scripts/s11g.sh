# The A_MN fragments pinned before the wgmma fence: A/B against the commit before (same machine), SASS counts, ncu cycles.
source .dev/common.sh
timeout 150 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 30 --point "" --point "SWAP=1" \
  --point "A_MN=0,OVERLAP=1" --point "A_MN=1,BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1" --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop.txt; grep -B3 -A6 "correctness: [^o]" $OUT/$M-hop.txt | head -30
lib=$(ls -t /tmp/hopper_fp8_cache/*/kernel.so | tail -1)
for l in /tmp/hopper_fp8_cache/*/kernel.so; do echo "$l: $(cuobjdump --dump-sass $l | grep -c 'WARPGROUP.ARRIVE') arrives, $(cuobjdump --dump-sass $l | grep -c 'QGMMA') qgmma"; done
timeout 100 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 30 --template-dir .dev/beforefix --point "" \
  --out $OUT/hop-before > $OUT/$M-hop-before.txt 2>&1
echo "before rc $?"; grep -A30 "^== fp8_gemm" $OUT/$M-hop-before.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
timeout 100 $NCU --clock-control none -k regex:wgmma --launch-skip 2 --launch-count 1 --metrics sm__cycles_elapsed.max,smsp__inst_executed.sum \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm --profile 6144,4608,7168 --point "" --out /tmp/x 2>&1 | grep -E "cycles|inst_exec"
cd $OUT && tar czf hop.tgz hop hop-before && rm -rf hop hop-before
