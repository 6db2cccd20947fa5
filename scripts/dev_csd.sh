# The device session of the CSD work: GPU parity test, then bench_csd.py against MRtrix's dwi2fod
# carried in .peer/ (bin, libmrtrix and its libraries from this machine's Debian packages).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/tests/py PYTHON=python3 PYTHONUNBUFFERED=1
if [ -d .peer ]; then
    export PATH=$PWD/.peer/mrtrix/bin:$PATH LD_LIBRARY_PATH=$PWD/.peer/libs
    dwi2fod -version | head -1
fi
nproc
case "${1:-tests,bench}" in *tests*)
    (cd tests/gpu && timeout 300 python3 test_csd_gpu.py 2>&1 | tail -14) ;;
esac
case "${1:-tests,bench}" in *bench*)
    timeout 500 python3 bench/bench_csd.py ${BENCH_ARGS:---threads 1,all --precisions float,double --cpu1-voxels 2000} 2>&1 | grep -v "^note: .*solved" | tail -40 ;;
esac
