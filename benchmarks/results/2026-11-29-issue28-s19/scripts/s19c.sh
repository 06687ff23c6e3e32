# Call C (same machine): fp8_gemm's best beside cuBLASLt; the adversarial suite; ncu of the K-major best's point at
# 6144x4608x7168; the diagnostic variants of .dev/variants.sh on the TAIL_N 96 point (results wrong on purpose).
source .dev/common.sh
timeout 100 python3 benchmarks/evolution_result.py --store /tmp/tg/store --run throughput-fp8-gemm-s19 \
  --json-out $OUT/$M-fp8gemm-evolution-result.json > $OUT/$M-fp8gemm-evolution-result.txt 2>&1
echo "result rc $?"; tail -4 $OUT/$M-fp8gemm-evolution-result.txt
timeout 300 python3 benchmarks/adversarial.py --quick --json-out /tmp/adv.json > $OUT/$M-adversarial.txt 2>&1
echo "adversarial rc $?"; tail -2 $OUT/$M-adversarial.txt | cut -c1-300
T=kernels/fp8_gemm_kmajor/templates/cuda/wgmma_core.cu.j2; cp $T /tmp/o.j2; source .dev/variants.sh
P96="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2,TAIL_N=96"
{ head -1 /tmp/points.txt | sed 's/^/kernel /'; for V in kernel noload nomma nopromo noload+nomma; do echo "$V $P96"; done; } > /tmp/runs.txt
N=$OUT/$M-ncu.txt; : > $N
while read -r V P; do
  cp /tmp/o.j2 $T; variant $V
  echo "== $V $P" >> $N
  timeout 60 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done < /tmp/runs.txt
cp /tmp/o.j2 $T
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active|lts__|inst_exec|rror" $N
