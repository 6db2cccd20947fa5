# The CPU engine's recovery and calibration tests, with every fit on the GPU.
cd "$(dirname "$0")/../py" && DIMOC_FIT_DEVICE=gpu exec "$PYTHON" test_recovery.py
