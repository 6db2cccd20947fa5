# The recovery tests of the restricted-diffusion models (stick_zeppelin_ball, charmed, activeax,
# sandi), every fit of their pipelines on the GPU (the simulations stay on the host).
cd "$(dirname "$0")/../py" || exit 1
status=0
for t in test_stick_zeppelin_ball.py test_charmed.py test_activeax.py test_sandi.py; do
    DIMOC_FIT_DEVICE=gpu "$PYTHON" "$t" || status=1
done
exit $status
