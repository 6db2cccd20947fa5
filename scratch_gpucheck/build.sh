# builds scratch_gpucheck/gpu_check_<model> from the repo root
CUDA=${CUDA:-/usr/local/cuda}
for m in exp_decay ball_1_stick; do
  gcc -O2 -Wall -Wno-unused-function -Itemplates -I. -I$CUDA/include \
    -DMODEL_FILE="\"tests/models_handwritten/$m.c\"" -DMODEL_FILE_PLAIN="\"\\\"tests/models_handwritten/$m.c\\\"\"" \
    scratch_gpucheck/gpu_check.c -o scratch_gpucheck/gpu_check_$m -L$CUDA/lib64 -L$CUDA/lib64/stubs -lnvrtc -lcuda -lm || exit 1
done
