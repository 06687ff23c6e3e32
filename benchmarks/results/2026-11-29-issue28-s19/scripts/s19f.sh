# Call F: INTERLEAVE 0 / 9 / 16 on the template's default (two consumers, BM 128) and on two consumers with EPI 2.
source .dev/common.sh
D="EPI=2,OVERLAP=0,SPLIT_K=1,TAIL_N=64"
timeout 120 python3 benchmarks/hopper_fp8.py --problems fp8_gemm_kmajor --quick --reps 20 --point "" --point "INTERLEAVE=9" \
  --point "INTERLEAVE=16" --point "$D" --point "$D,INTERLEAVE=9" --out /tmp/hf > $OUT/$M-interleave-2c.txt 2>&1
echo "rc $?"; sed -n '/== fp8_gemm_kmajor on/,$p' $OUT/$M-interleave-2c.txt | cut -c1-200
