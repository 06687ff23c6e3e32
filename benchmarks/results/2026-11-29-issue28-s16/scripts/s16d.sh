# Call 4 (run inline, same machine as call 3): fp8_gemm's TAIL_N points, checked and timed. Both points left A_MN at
# its default (1), which EPI 2 does not take: both were refused by the template's static_assert, and the timing table
# has cuBLASLt alone. The call with A_MN=0 was refused: too little device time was left to start a machine.
source .dev/common.sh
timeout 60 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --check-only --check-benchmarks \
  --point "EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=96" --point "EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=64" --out /tmp/g1 \
  > $OUT/$M-fp8gemm-check-tail.txt 2>&1
timeout 60 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 20 --point "EPI=2,OVERLAP=0,SPLIT_K=1" \
  --point "EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=96" --out /tmp/g2 > $OUT/$M-fp8gemm-time-tail.txt 2>&1
