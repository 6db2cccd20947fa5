#!/usr/bin/env bash
# Installs the Debian packages dimoc needs to build and test (idempotent: only what is missing).
# The CUDA toolkit (NVRTC, headers) is used from $CUDA_HOME (default /usr/local/cuda) when it
# is there; otherwise Debian's nvidia-cuda-toolkit is installed if the archive offers it.
set -euo pipefail
# libgiftiio-dev and libexpat1-dev: GIFTI surfaces (linked statically); mrtrix3: the tests read
# dimoc's .tck files with MRtrix's tckinfo/tckstats (it brings Qt5 and Mesa: ~150-200 MB on a
# bare system, ~57 MB where those are already installed).
pkgs=(make gcc flex bison libnifti2-dev zlib1g-dev libpng-dev libgiftiio-dev libexpat1-dev clang
      python3 python3-numpy python3-scipy python3-nibabel python3-dipy mrtrix3)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$cuda/include/nvrtc.h" ] && ! dpkg-query -W nvidia-cuda-toolkit >/dev/null 2>&1; then
    if apt-cache show nvidia-cuda-toolkit >/dev/null 2>&1; then missing+=(nvidia-cuda-toolkit); fi
fi
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
