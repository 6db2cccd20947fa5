#!/usr/bin/env bash
# The Bessel functions of templates/maths/mathlib.h give the same bits on the GPU as on the host
# when neither fuses multiply-adds (tests/gpu/bessel_parity.cu, built by nvcc in float and double).
set -u
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then echo "FAIL bessel-parity: no nvcc"; exit 1; fi
tmp=${TMPROOT:-/tmp}/bessel_parity
mkdir -p "$tmp"
rc=0
for r in double float; do
    "$NVCC" -O2 -fmad=false -Xcompiler -ffp-contract=off -Itemplates -DREAL=$r \
        -o "$tmp/bessel_parity_$r" tests/gpu/bessel_parity.cu || { echo "FAIL bessel-parity-build-$r"; rc=1; continue; }
    "$tmp/bessel_parity_$r" || rc=1
done
exit $rc
