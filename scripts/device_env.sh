# Sourced by the device-session scripts (scripts/gpu_session.sh, dev_*.sh): $OUT made, the
# carried Python wheels (.whl/, the device has no package index) installed under /tmp/site, the
# tests' Python chosen, and the GPU named.
OUT=${OUT:-/tmp/dimoc-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
export PYTHON=python3 PYTHONUNBUFFERED=1
nvidia-smi -L
