# Call B, meant for call A's machine: fp8_gemm's tuning evolution from scratch and its best beside cuBLASLt; ncu of
# call A's best at 6144x4608x7168 (and its TAIL_N twin).
source .dev/common.sh
rm -rf /tmp/tg
timeout 380 python3 benchmarks/tuning_throughput.py --problem fp8_gemm --label fp8-gemm-s17 --race --overlap 1 \
  --candidates 200 --minutes 5.2 --keep /tmp/tg --save $OUT/$M-fp8gemm-throughput.json > $OUT/$M-fp8gemm-run.txt 2>&1
echo "fp8_gemm rc $?"; tail -3 $OUT/$M-fp8gemm-run.txt
timeout 100 python3 benchmarks/evolution_result.py --store /tmp/tg/store --run throughput-fp8-gemm-s17 \
  --json-out $OUT/$M-fp8gemm-evolution-result.json > $OUT/$M-fp8gemm-evolution-result.txt 2>&1
echo "result rc $?"; tail -32 $OUT/$M-fp8gemm-evolution-result.txt
if [ ! -s /tmp/points.txt ]; then
  echo "call A's points are not on this machine: ncu of the known three-consumer points instead"
  P0="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2"; printf '%s\n%s\n' "$P0,TAIL_N=96" "$P0" > /tmp/points.txt
fi
N=$OUT/$M-ncu.txt; : > $N
while read -r P; do
  echo "== point $P" >> $N
  timeout 45 ncu --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics \
    sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x >> $N 2>&1
done < /tmp/points.txt
grep -E "==|cycles_elapsed.max|per_second|duration|tensor|cycles_active" $N
