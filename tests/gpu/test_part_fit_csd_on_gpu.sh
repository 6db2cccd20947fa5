# --part and merge for fit (every method) and csd with the GPU doing each part and the whole run:
# the merged parts byte-identical to one GPU run.
cd "$(dirname "$0")/../py" && DIMOC_PART_DEVICE=gpu exec "$PYTHON" test_part_fit_csd.py
