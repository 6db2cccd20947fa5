"""The Python package's contract, checked against closed forms computed here with numpy: a
model's diagnostics carry their lines and columns; simulate gives the ball & stick formula; the
tensor fits recover a known tensor's eigenvalues and FA; a fit recovers the parameters of a
noise-free signal; CSD's peak finds a fibre's direction; wrong arguments are ValueErrors naming
the argument, raised before any work."""
import numpy as np
import pytest

import dimoc

AFFINE = np.diag([2.0, 2.0, 2.0, 1.0])


def ball_stick(bvals, bvecs, S0, d, f, v):
    """The ball & 1 stick signal: S0 ((1 - f) exp(-b d) + f exp(-b d (g . v)^2))."""
    c = np.asarray(v) @ bvecs
    return S0 * ((1 - f) * np.exp(-bvals * d) + f * np.exp(-bvals * d * c * c))


def tensor_signal(bvals, bvecs, S0, D):
    return S0 * np.exp(-bvals * np.einsum("im,ij,jm->m", bvecs, D, bvecs))


def rotation(rng):
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q


def test_model_error_positions():
    source = ("model broken \"a model with one error\"\n"
              "param S0 in (0, inf) init b0\n"
              "signal S0 * exp(-bval * Dx)\n")
    with pytest.raises(dimoc.ModelError) as caught:
        dimoc.Model(source)
    errors = [x for x in caught.value.diagnostics if "Dx" in x.message]
    assert errors, [x.message for x in caught.value.diagnostics]
    assert errors[0].line == 3 and errors[0].column == source.splitlines()[2].index("Dx") + 1


def test_model_parameters():
    m = dimoc.Model("ball_1_stick")
    assert [p.name for p in m.parameters] == ["S0", "d", "f1", "th1", "ph1"]


def test_simulate_ball_stick_formula(scheme):
    bvals, bvecs = scheme
    rng = np.random.default_rng(3)
    shape = (4, 3, 2)
    S0, d, f = rng.uniform(500, 1500, shape), rng.uniform(1e-3, 2e-3, shape), \
        rng.uniform(0.2, 0.8, shape)
    th, ph = rng.uniform(0.2, 2.9, shape), rng.uniform(0, 6.2, shape)
    sim = dimoc.simulate("ball_1_stick", bvals, bvecs, params={
        "S0": S0, "d": d, "f1": f, "th1": th, "ph1": ph}, affine=AFFINE, out_type="float64",
        progress=False)
    signal = np.asarray(sim[0])
    assert signal.shape == shape + (bvals.size,)
    for idx in np.ndindex(shape):
        v = [np.sin(th[idx]) * np.cos(ph[idx]), np.sin(th[idx]) * np.sin(ph[idx]), np.cos(th[idx])]
        want = ball_stick(bvals, bvecs, S0[idx], d[idx], f[idx], v)
        np.testing.assert_allclose(signal[idx], want, rtol=1e-10)


@pytest.fixture(scope="module")
def tensors(scheme):
    """Noise-free tensor signals of known eigenvalues in random frames: (data, eigenvalues)."""
    bvals, bvecs = scheme
    rng = np.random.default_rng(5)
    shape = (3, 3, 2)
    data = np.zeros(shape + (bvals.size,))
    evals = np.zeros(shape + (3,))
    for idx in np.ndindex(shape):
        lam = np.sort(rng.uniform(0.2e-3, 1.8e-3, 3))[::-1]
        R = rotation(rng)
        data[idx] = tensor_signal(bvals, bvecs, 1000.0, R @ np.diag(lam) @ R.T)
        evals[idx] = lam
    return data, evals


def fa(lam):
    m = lam.mean(axis=-1, keepdims=True)
    return np.sqrt(1.5 * ((lam - m) ** 2).sum(-1) / (lam ** 2).sum(-1))


def test_dti_recovers_tensor(scheme, tensors):
    bvals, bvecs = scheme
    data, lam = tensors
    r = dimoc.dti(data, bvals, bvecs, out_type="float64", progress=False)
    np.testing.assert_allclose(np.stack([r["L1"], r["L2"], r["L3"]], -1), lam, rtol=1e-6)
    np.testing.assert_allclose(r["FA"], fa(lam), atol=1e-6)
    np.testing.assert_allclose(r["MD"], lam.mean(-1), rtol=1e-6)


def test_fit_dti_model_recovers_tensor(scheme, tensors):
    bvals, bvecs = scheme
    data, lam = tensors
    r = dimoc.fit("dti", data, bvals, bvecs, device="cpu", progress=False, out_type="float64")
    assert (r.status == 1).all()
    np.testing.assert_allclose(r["FA"], fa(lam), atol=1e-5)
    np.testing.assert_allclose(r["MD"], lam.mean(-1), rtol=1e-5)


def test_fit_ball_stick_noise_free(scheme):
    bvals, bvecs = scheme
    rng = np.random.default_rng(9)
    shape = (3, 2, 2)
    truth = {"S0": rng.uniform(800, 1200, shape), "d": rng.uniform(1e-3, 2e-3, shape),
             "f1": rng.uniform(0.3, 0.7, shape)}
    v = rng.normal(size=shape + (3,))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    data = np.zeros(shape + (bvals.size,))
    for idx in np.ndindex(shape):
        data[idx] = ball_stick(bvals, bvecs, truth["S0"][idx], truth["d"][idx], truth["f1"][idx],
                               v[idx])
    r = dimoc.fit("ball_1_stick", data, bvals, bvecs, device="cpu", progress=False,
                  out_type="float64")
    for k, want in truth.items():
        np.testing.assert_allclose(r[k], want, rtol=1e-4, err_msg=k)
    cos = np.abs(np.sum(r["dyads1"] * v, axis=-1))
    assert np.degrees(np.arccos(np.clip(cos.min(), 0, 1))) < 0.1


def test_csd_peak_follows_the_fibre(scheme):
    bvals, bvecs = scheme
    rng = np.random.default_rng(11)
    shape = (5, 5, 4)
    v = rng.normal(size=shape + (3,))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    data = np.zeros(shape + (bvals.size,))
    for idx in np.ndindex(shape):
        data[idx] = ball_stick(bvals, bvecs, 1000.0, 1.7e-3, 0.7, v[idx])
    one = bvals < 2000  # a single shell and b = 0
    resp = dimoc.response(data[..., one], bvals[one], bvecs[:, one], algorithm="fa",
                          affine=AFFINE, progress=False)
    fod = dimoc.csd(data[..., one], bvals[one], bvecs[:, one], response=resp, affine=AFFINE,
                    progress=False)
    pk = dimoc.peaks(fod, num=1, progress=False)
    cos = np.abs(np.sum(pk["dyads1"] * v, axis=-1))
    assert np.degrees(np.arccos(np.clip(np.median(cos), 0, 1))) < 3


@pytest.mark.parametrize("label, word, change", [
    ("3-D data", "data", lambda a: dict(a, data=a["data"][..., 0])),
    ("NaN inside", "data", lambda a: dict(a, data=np.where(np.arange(a["data"].size).reshape(
        a["data"].shape) == 7, np.nan, a["data"]))),
    ("bvals count", "bvals", lambda a: dict(a, bvals=a["bvals"][:-1])),
    ("bvecs not unit", "bvecs", lambda a: dict(a, bvecs=a["bvecs"] * 2)),
    ("mask grid", "mask", lambda a: dict(a, mask=np.ones((2, 2, 2)))),
    ("unknown option", "colour", lambda a: dict(a, colour=1)),
])
def test_wrong_arguments_before_work(scheme, label, word, change):
    bvals, bvecs = scheme
    args = dict(data=np.full((3, 3, 2, bvals.size), 500.0), bvals=bvals, bvecs=bvecs,
                mask=np.ones((3, 3, 2)))
    calls = []
    with pytest.raises(ValueError, match=word):
        dimoc.fit("ball_1_stick", progress=lambda s, f: calls.append(s), device="cpu",
                  **change(args))
    assert not calls, label
