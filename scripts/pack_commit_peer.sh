#!/usr/bin/env bash
# Packs dmri-commit 2.4.2 and what it imports as one archive for the device machine (Python 3.12,
# no package index; a carry holds 64 MiB): the cp312 wheels unpacked, their tests and dipy's
# sample data left out, debug sections stripped from the extension modules that carry no
# RPATH (those patched by auditwheel must stay as they are, or the loader refuses them); dipy's
# data files (its spheres) go in a second, small archive.  On the device:
#   tar -C /tmp/peer -xJf .peer/site.tar.xz && tar -C /tmp/peer -xzf .peer/dipydata.tar.gz
#   PYTHONPATH=/tmp/peer python3 bench/bench_commit.py --devices gpu
set -euo pipefail
w=${WORK:-/tmp/commit-peer}
out=$PWD/.peer
rm -rf "$w" && mkdir -p "$w/wheels" "$w/site" "$out"
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$w/wheels" dmri-commit
for name in dmri_commit dmri_amico dmri_dicelib scipy dipy nibabel numpydoc psutil threadpoolctl \
    h5py cython tqdm trx_python packaging typing_extensions importlib_resources deepdiff \
    orderly_set; do
    python3 -m zipfile -e "$(ls "$w"/wheels/"$name"-*.whl | head -1)" "$w/site/"
done
find "$w/site" -type d \( -name tests -o -name test -o -name __pycache__ \) -prune -exec rm -rf {} +
tar -C "$w/site" -czf "$out/dipydata.tar.gz" dipy/data/files
rm -rf "$w/site/dipy/data/files"
find "$w/site" -name '*.so' -not -path '*.libs/*' | while read -r f; do
    readelf -d "$f" 2>/dev/null | grep -q 'RPATH\|RUNPATH' || strip --strip-debug "$f"
done
tar -C "$w/site" -cf - . | xz -T0 -6 >"$out/site.tar.xz"
ls -la "$out"
