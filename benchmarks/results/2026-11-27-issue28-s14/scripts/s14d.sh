# Which unit's throughput is sm__throughput's 83 % (breakdown), ours (three consumers, EPI 2) and cuBLASLt's.
source .dev/common.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
C3="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2"
timeout 200 $NCU --clock-control none -k regex:"wgmma|nvjet" --launch-skip 2 --launch-count 2 \
  --metrics "breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second" \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --profile-vendor --point "$C3" \
  --out /tmp/x > $OUT/$M-ncu-breakdown.txt 2>&1
echo "ncu rc $?"
grep -vE "^==PROF==|^\[" $OUT/$M-ncu-breakdown.txt | awk 'NF>=3 && ($NF+0 > 20 || /wgmma|nvjet|cycles/)' | cut -c1-150 | head -80
