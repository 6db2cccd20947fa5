# The shipped-model tests (IVIM, DKI, free-water DTI, NODDI-DTI: simulate, fit, pipelines,
# DIPY comparisons) with every fit on the GPU (DIMOC_FIT_DEVICE=gpu: dmtest.dimoc adds
# --device gpu to `dimoc fit`, modelcheck.pipeline to `dimoc pipeline`).
cd "$(dirname "$0")/../py" || exit 1
status=0
for t in test_ivim.py test_dki.py test_fwdti.py test_noddi_dti.py; do
    DIMOC_FIT_DEVICE=gpu "$PYTHON" "$t" || status=1
done
exit $status
