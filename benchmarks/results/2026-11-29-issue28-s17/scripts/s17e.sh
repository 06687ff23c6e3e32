# Call E (diagnostic): do the three consumer warpgroups promote at the same time? The TAIL_N 96 point at
# 6144x4608x7168 under ncu as it is, and with consumer warpgroup w spinning w x S cycles (clock64) before its first
# K block, S = 128, 256, 512: if their K loops run in lock step (all three promoting at once, sharing the issue slots),
# a start out of step should shorten the kernel, unless they fall back into step. Same results as the template.
source .dev/common.sh
T=kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2
cp $T /tmp/orig.j2
P="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
N=$OUT/$M-ncu-stagger.txt; : > $N
for S in 0 128 256 512 0; do
  cp /tmp/orig.j2 $T
  [ $S -gt 0 ] && sed -i "1018a\        { const long long t0 = clock64(); while (clock64() - t0 < (long long)warpgroup * $S) { } }" $T
  echo "== stagger $S: $(sed -n 1019p $T | sed 's/^ *//')" >> $N
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done
cp /tmp/orig.j2 $T
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active|inst_executed|issue_active|rror" $N
W=$OUT/$M-ncu-warpstate.txt
timeout 90 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --section WarpStateStats \
  --section SchedulerStats python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 \
  --point "$P" --out /tmp/x > $W 2>&1
grep -vE "^==PROF==|^\[|^ *-+" $W | tail -30 | cut -c1-160
