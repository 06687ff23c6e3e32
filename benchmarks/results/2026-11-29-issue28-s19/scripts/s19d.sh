# Call D: FFMA interleaving (INTERLEAVE 0 / 9 / 16) on the TAIL_N 96 three-consumer point: timed beside cuBLASLt on the
# 18 shapes (checked first), then ncu at 6144x4608x7168.
source .dev/common.sh
echo "cuobjdump: $(command -v cuobjdump) beside nvcc: $(ls $(dirname $(readlink -f $(command -v nvcc)))/cuobjdump 2>&1)"
P="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --quick --reps 20 --point "$P" --point "$P,INTERLEAVE=9" \
  --point "$P,INTERLEAVE=16" --out /tmp/hf > $OUT/$M-interleave-table.txt 2>&1
echo "table rc $?"; grep -E "interleave|geomean|6144x4608x7168|ok|FAIL|rror" $OUT/$M-interleave-table.txt | cut -c1-240 | head -30
N=$OUT/$M-interleave-ncu.txt; : > $N
for I in 0 9 16; do
  echo "== INTERLEAVE $I" >> $N
  timeout 50 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P,INTERLEAVE=$I" --out /tmp/x >> $N 2>&1
done
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|inst_exec|rror" $N
