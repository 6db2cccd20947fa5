# The held-out accuracy test (ball & 1-3 sticks, the NODDI-Watson cascade against scipy), with
# every fit on the GPU: the same starts, so the same 1.25x bound.
cd "$(dirname "$0")/../py" && DIMOC_FIT_DEVICE=gpu exec "$PYTHON" test_heldout_accuracy.py
