# EPI 2 with B multicast (CLUSTER 2) and with GROUP_M 16: cycles, clock, traffic under ncu; then times.
source .dev/common.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
C3="BM=192,CONSUMERS=3,STAGES=4,SPLIT_K=1,OVERLAP=0,EPI=2"
MET=sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sector_hit_rate.pct
for P in "$C3" "$C3,CLUSTER=2" "$C3,GROUP_M=16"; do
timeout 120 $NCU --clock-control none -k regex:"wgmma" --launch-skip 1 --launch-count 1 --metrics "$MET" \
  python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --profile 6144,4608,7168 --point "$P" --out /tmp/x > /tmp/ncu.txt 2>&1
echo "ncu $P rc $?"; cat /tmp/ncu.txt >> $OUT/$M-ncu-variants.txt
grep -E "cycles|per_second|duration|bytes|sectors|hit_rate" /tmp/ncu.txt | awk '{print "  ", $1, $(NF-1), $NF}'
done
timeout 300 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --reps 30 --point "$C3" --point "$C3,CLUSTER=2" \
  --point "$C3,GROUP_M=16" --point "$C3,EPI=1" --out $OUT/hop > $OUT/$M-hop4.txt 2>&1
echo "hopper rc $?"; grep -A40 "^== fp8_gemm" $OUT/$M-hop4.txt
cd $OUT && tar czf hop4.tgz hop 2>/dev/null; rm -rf hop
