# The scheme-column tests (tests/py/test_scheme.py), with every fit on the GPU.
cd "$(dirname "$0")/../py" && DIMOC_FIT_DEVICE=gpu exec "$PYTHON" test_scheme.py
