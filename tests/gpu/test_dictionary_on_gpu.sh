# The dictionary tests with --device gpu on every fit: the dictionary runs on the CPU with a
# one-line warning (tests/py/test_dictionary.py checks it) and the results are the same.
cd "$(dirname "$0")/../py" && DIMOC_FIT_DEVICE=gpu exec "$PYTHON" test_dictionary.py
