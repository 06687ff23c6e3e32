# Call E: the opposite of interleaving: every FFMA of a long run holds the warp (hold bit set), patched into the
# cached library of the TAIL_N 96 point; timed (18 shapes, checked) and under ncu, then the unpatched library again.
source .dev/common.sh
P="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
python3 .dev/hold.py "$P" save
N=$OUT/$M-hold.txt; : > $N
for MODE in hold restore; do
  python3 .dev/hold.py "$P" $MODE >> $N 2>&1
  timeout 60 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --quick --reps 20 --point "$P" --out /tmp/hf >> $N 2>&1
  timeout 50 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done
grep -E "changed|restore|correctness|geomean|6144x 4608|cycles_elapsed.max|per_second|duration|tensor|rror" $N
