# GPU tests of fp8_gemm's tuned points (BN 256, SWAP, B_MN), each alone and composed with the default.
source .dev/common.sh
timeout 280 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k "tuned_point and fp8_gemm-" > $OUT/$M-gpu-tests.log 2>&1
echo "gpu tests rc $?"; tail -15 $OUT/$M-gpu-tests.log
