set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/tests/py PYTHON=python3 PYTHONUNBUFFERED=1
cd tests/gpu && timeout 300 python3 test_csd_gpu.py 2>&1 | tail -14; cd ../..
timeout 300 python3 bench/bench_csd.py --no-peer --threads all --precisions float,double --cpu1-voxels 2000 2>&1 | grep -v "^note: .*solved" | tail -30
