# Call F (diagnostic): do the promotion's FFMAs cost because they read the wgmma's fresh accumulator registers? The
# TAIL_N 96 point at 6144x4608x7168 under ncu as it is, and with the K loop's FFMAs reading the fp32 accumulator
# instead of the temporary (acc = acc * s + acc: the same 64 FFMAs after the same wgmma wait, results wrong on purpose).
source .dev/common.sh
T=kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2
cp $T /tmp/orig.j2
P="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
N=$OUT/$M-ncu-operands.txt; : > $N
for V in kernel acc kernel acc; do
  cp /tmp/orig.j2 $T
  [ $V = acc ] && sed -i '713,716s/fmaf(t\[ms\]\[/fmaf(acc[ms][/' $T
  echo "== variant $V: $(sed -n 713p $T | sed 's/^ *//')" >> $N
  timeout 50 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done
cp /tmp/orig.j2 $T
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active|inst_executed|rror" $N
