# FUSE with the gatekeeper warp: where each item's time goes (timing only; nostore2 is wrong on purpose, noproxy and
# relaxed drop fences the memory model asks for).
source .dev/common.sh
for v in cur noproxy relaxed nostore2; do
  td=""; [ $v != cur ] && td="--template-dir .dev/fz_$v"
  timeout 100 python3 benchmarks/hopper_fp8.py --problems fp8_gemm --reps 10 --point "" --point "FUSE=2" $td \
    --out $OUT/hop_$v > $OUT/$M-hop-$v.txt 2>&1
  echo "== $v rc $?"; grep -E "1024x 1536|1024x 4608|6144x 4608|6144x 7168x  256|geomean" $OUT/$M-hop-$v.txt
done
cd $OUT && tar czf abl2.tgz hop_* $M-hop-*.txt 2>/dev/null; rm -rf hop_* $M-hop-*.txt
