# Models written with the compartment library against their old texts, and a library model
# recovering its parameters, with every fit on the GPU (NVRTC compiles the inlined code).
cd "$(dirname "$0")/../py" && DIMOC_FIT_DEVICE=gpu exec "$PYTHON" test_model_compartments.py
