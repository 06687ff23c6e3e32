# Shared-memory data-bank utilisation under ncu at 6144x4608x7168: B_MN 3 against the default (pre-pass of B).
source .dev/common.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
MET=sm__cycles_elapsed.max,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_reads.sum,l1tex__data_bank_writes.sum
for P in "B_MN=3,STAGES=4" "B_MN=0"; do
  timeout 150 $NCU --clock-control none -k regex:wgmma --launch-skip 2 --launch-count 1 --metrics "$MET" \
    python3 benchmarks/hopper_fp8.py --problems fp8_gemm --profile 6144,4608,7168 --point "$P" --out /tmp/x > $OUT/ncu-smem-$P.txt 2>&1
  echo "ncu $P rc $?"; grep -E "cycles_elapsed|bank_|wavefronts|throughput|gmma" $OUT/ncu-smem-$P.txt
done
