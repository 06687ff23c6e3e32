# OVERLAP with two column parts (each part one wgmma group, one in flight while the other is promoted): check, ncu, times.
source .dev/common.sh
C3="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1"
timeout 200 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --check-only --check-benchmarks \
  --point "$C3,OVERLAP=1,N_PARTS=2" --point "N_PARTS=2,OVERLAP=1" --point "BN=192,N_PARTS=2,OVERLAP=1,STAGES=4" \
  --out $OUT/chk > $OUT/$M-chk.txt 2>&1
echo "check rc $?"; grep -E "correctness" $OUT/$M-chk.txt | head -20
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
MET=sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed
for P in "$C3,OVERLAP=1,N_PARTS=2" "$C3,OVERLAP=0,EPI=2"; do
timeout 120 $NCU --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 \
  --metrics "$MET,regex:smsp__average_warps_issue_stalled_(barrier|wait|dispatch_stall|gmma|long_scoreboard)_per_issue_active\.ratio" \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x > /tmp/ncu.txt 2>&1
echo "ncu $P rc $?"; cat /tmp/ncu.txt >> $OUT/$M-ncu.txt
grep -E "cycles|per_second|duration|inst_exec|stalled" /tmp/ncu.txt | awk '{print "  ", $1, $NF}'
done
if ! grep -q "correctness: [^o]" $OUT/$M-chk.txt; then
timeout 300 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --reps 30 --point "$C3,OVERLAP=0" \
  --point "$C3,OVERLAP=1,N_PARTS=2" --point "$C3,OVERLAP=0,EPI=2" --point "N_PARTS=2,OVERLAP=1" --point "" \
  --point "BN=192,N_PARTS=2,OVERLAP=1,STAGES=4" --out $OUT/hop > $OUT/$M-hop.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop.txt
fi
cd $OUT && tar czf hop.tgz hop chk 2>/dev/null; rm -rf hop chk
