#!/usr/bin/env bash
# Installs the Debian packages dimoc needs to build and test (idempotent: only what is missing).
# The CUDA toolkit (NVRTC, headers) is used from $CUDA_HOME (default /usr/local/cuda) when it
# is there; otherwise Debian's nvidia-cuda-toolkit is installed if the archive offers it.
set -euo pipefail
# libdeflate-dev: whole-buffer decompression of .nii.gz, about twice zlib's speed (linked
# statically, so the program needs no libdeflate where it runs); libisal-dev: Intel's ISA-L,
# whose deflate compresses the .nii.gz outputs 4.3-4.8 times faster than libdeflate's fastest
# level to within 1% of its size (docs/performance.md, "Writing .nii.gz"); libgiftiio-dev and
# libexpat1-dev: GIFTI surfaces (linked statically); libzip-dev: TRX tractograms (zip archives,
# stored or deflated, zip64); libjansson-dev: JSON read (TRX headers, BIDS sidecars; linked
# statically); mrtrix3: the tests read
# dimoc's .tck files with MRtrix's tckinfo/tckstats (it brings Qt5 and Mesa: ~150-200 MB on a
# bare system, ~57 MB where those are already installed).  slurm-wlm and munge: the test of
# `dimoc pipeline --slurm` (tests/py/test_slurm.py) runs its own one-node SLURM.  chromium: the
# test of the BIDS group report (tests/py/test_bids_group.py) loads the page in Debian's
# headless Chromium, driven by Playwright (below); ~122 MB to download, ~414 MB on disk (beside
# mrtrix3's Qt and Mesa, already there).  pkgconf: the test of the C API builds its example
# through the installed dimoc.pc (tests/py/test_c_api.py).  python3-nbclient, python3-nbformat,
# python3-ipykernel and python3-matplotlib: the Python tutorial notebook (docs/tutorial.ipynb)
# is executed by its test (tests/py/test_notebook.py) in a Python kernel, its plots made by
# matplotlib.  python3-pytest: the Python package's own suite (tests/pytest, run by
# tests/py/test_pytest_package.py).
pkgs=(make gcc flex bison libnifti2-dev zlib1g-dev libdeflate-dev libisal-dev libpng-dev libgiftiio-dev
      libexpat1-dev libzip-dev libjansson-dev clang pkgconf
      python3 python3-pip python3-numpy python3-scipy python3-nibabel python3-dipy mrtrix3
      slurm-wlm munge chromium python3-nbclient python3-nbformat python3-ipykernel
      python3-matplotlib python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$cuda/include/nvrtc.h" ] && ! dpkg-query -W nvidia-cuda-toolkit >/dev/null 2>&1; then
    if apt-cache show nvidia-cuda-toolkit >/dev/null 2>&1; then missing+=(nvidia-cuda-toolkit); fi
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
else
    echo "install-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python peers the tests compare against, from PyPI, for the tests' interpreter ($PYTHON, default
# /usr/bin/python3).  dmri-commit (COMMIT: `dimoc commit`'s peer, tests/py/commitpeer.py) ships
# prebuilt manylinux wheels, with dmri-amico and dmri-dicelib; at run time it also imports
# pyximport (Cython), numpydoc's docscrape, psutil and threadpoolctl.  --no-deps: its metadata asks
# numpy >= 1.24.4 and nibabel >= 5.2.1, and letting pip satisfy that would replace Debian's numpy
# (with 2.x, which Debian's scipy and dipy are not built for) and nibabel under every other test;
# COMMIT runs as it is with Debian's numpy 1.24.2 and nibabel 5.0.0.  Pinned: the tests' facts
# (docs/commit-facts.md) are those of this version.
# dmipy 1.0.5 (tests/py/test_dmipy_peer.py) is pure Python; --no-deps matters even more there:
# its metadata pins scipy==1.4.1 (no wheel for Python 3.11, and it would replace Debian's scipy).
# It runs with Debian's numpy/scipy as they are (without numba and pathos, which it only
# suggests: its brute2fine fit of the test's 100 voxels takes ~1.5 s without them).
# trx-python 0.6 (tests/py/test_trx_trk.py: TRX files read and written against dimoc's), also
# --no-deps: its trx_file_memmap module imports with Debian's numpy and nibabel; deepdiff and
# typer, which its metadata asks for, serve its command-line tools only.
# playwright 1.65.2 (tests/py/test_bids_group.py drives Debian's chromium through it, launched by
# its path: `playwright install`, which downloads browsers of its own, is never run) with greenlet
# 3.5.6, its one requirement (>= 3.1.1; Debian's python3-greenlet is 2.0.2): a 53 MB wheel that
# carries its Node driver (165 MB installed) and a 0.6 MB one.
py=${PYTHON:-/usr/bin/python3}
pypkgs=(dmri-commit==2.4.2 dmri-amico==2.1.1 dmri-dicelib==1.3.0 cython==3.0.12 numpydoc==1.11.0
        psutil==7.2.2 threadpoolctl==3.8.0 dmipy==1.0.5 trx-python==0.6 playwright==1.65.2
        greenlet==3.5.6)
pymissing=()
for p in "${pypkgs[@]}"; do
    "$py" -c 'import sys; from importlib.metadata import version
n, v = sys.argv[1].split("=="); sys.exit(version(n) != v)' "$p" 2>/dev/null || pymissing+=("$p")
done
if [ ${#pymissing[@]} -eq 0 ]; then
    echo "install-deps: all Python peers present"
else
    echo "install-deps: pip installing ${pymissing[*]}"
    brk=""
    "$py" -m pip install --help 2>/dev/null | grep -q -- --break-system-packages && brk=--break-system-packages
    $sudo "$py" -m pip install -q --no-deps --no-warn-script-location $brk "${pymissing[@]}"
fi
