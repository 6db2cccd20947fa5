# The fractions tests (tests/py/test_fractions.py), with every fit on the GPU.
cd "$(dirname "$0")/../py" && DIMOC_FIT_DEVICE=gpu exec "$PYTHON" test_fractions.py
