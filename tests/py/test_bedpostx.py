"""The bedpostx pipeline (pipelines/bedpostx.sh through `dimoc pipeline`) with FSL's defaults
(3 fibres, model 2: sticks with gamma-distributed diffusivities) on a crossing phantom simulated
by ball_2_sticks_gamma: single-fibre voxels, 90 and 60 degree crossings (f1 = f2 = 0.3), random
orientations, d = 1.5e-3, d_std = 5e-4, SNR 30 (Rician), 6 b=0 + 64 b=1000 + 64 b=2000.  Checks
ARD (a second fibre where there is one, none where there is not, no third fibre anywhere), the
angular errors, d, d_std and S0 against the truth, FSL's file names and conventions, the burn-in
shared out over the stages, model 1 with other MCMC lengths, and the refusals."""
import json
import os

import numpy as np

from crossings import D, D_STD, REGIONS, crossing_phantom
from dmtest import angle_deg, check, dimoc, finish, load, workdir

N = 20  # voxels per region
d = workdir("bedpostx")
inputs, dirs = crossing_phantom(d, N, seed=2024, noise_seed=3)
data, mask, bvals, bvecs = inputs[1], inputs[3], inputs[5], inputs[7]

extra = ["--device", os.environ["DIMOC_FIT_DEVICE"]] if os.environ.get("DIMOC_FIT_DEVICE") else []
out = os.path.join(d, "out.bedpostX")
rc, stdout, err = dimoc("pipeline", "bedpostx", *inputs, "--out", out, "--quiet", *extra, expect_ok=False)
check("pipeline-runs", rc == 0, err.strip()[-300:])
# --precision auto (the default): double on the CPU, float for the MCMC stages on a GPU.
on_gpu = os.environ.get("DIMOC_FIT_DEVICE") == "gpu"
got = {m: json.load(open(os.path.join(out, "dimoc", m, "provenance.json")))["options"]["precision"]
       for m in ("ball_1_stick_gamma", "ball_2_sticks_gamma", "ball_3_sticks_gamma")} if rc == 0 else {}
check("precision-auto", got == {"ball_1_stick_gamma": "double", "ball_2_sticks_gamma": "float" if on_gpu else "double",
                                "ball_3_sticks_gamma": "float" if on_gpu else "double"}, str(got))


def fsl_files(folder, nfibres, nsamples, model2):
    """Every FSL file of a run, read back with nibabel, with the shape FSL gives it."""
    expected = {f"merged_{p}{n}samples": (3, N, 1, nsamples) for p in ("th", "ph", "f")
                for n in range(1, nfibres + 1)}
    expected.update({f"mean_{p}{n}samples": (3, N, 1) for p in ("th", "ph", "f") for n in range(1, nfibres + 1)})
    expected.update({f"dyads{n}": (3, N, 1, 3) for n in range(1, nfibres + 1)})
    expected.update({f"dyads{n}_dispersion": (3, N, 1) for n in range(1, nfibres + 1)})
    expected.update({"mean_dsamples": (3, N, 1), "mean_S0samples": (3, N, 1), "nodif_brain_mask": (3, N, 1)})
    if model2:
        expected["mean_d_stdsamples"] = (3, N, 1)
    maps, problems = {}, []
    for name, shape in expected.items():
        try:
            maps[name] = load(os.path.join(folder, name + ".nii.gz"))
            if maps[name].shape != shape:
                problems.append(f"{name} has shape {maps[name].shape}, not {shape}")
        except Exception as e:  # a missing or unreadable file
            problems.append(f"{name}: {e}")
    if not model2 and os.path.exists(os.path.join(folder, "mean_d_stdsamples.nii.gz")):
        problems.append("mean_d_stdsamples written for model 1")
    return maps, problems


# The default run: 3 fibres of model 2, 50 samples (FSL's 1250 jumps, one sample every 25).
maps, problems = fsl_files(out, 3, 50, True)
check("fsl-files-read-back", not problems, "; ".join(problems[:4]) or f"{len(maps)} files, 3 fibres")
if problems:
    finish()

f2, f3 = maps["mean_f2samples"], maps["mean_f3samples"]
for r, region in enumerate(REGIONS):
    frac = np.mean(f2[r] > 0.05)
    if region == "single":
        check("ard-no-second-fibre-in-single", frac <= 0.10,
              f"mean_f2samples > 0.05 in {100 * frac:.0f}% of single-fibre voxels (at most 10%)")
    else:
        check(f"second-fibre-found-{region}", frac >= 0.90,
              f"mean_f2samples > 0.05 in {100 * frac:.0f}% of voxels (at least 90%)")
# No voxel has a third fibre: ARD shrinks f3 in one- and two-fibre voxels alike (a 60-degree
# crossing's second fibre is now and then shared with the third stick: 0-2 of its 20 voxels
# over noise draws, as with the stages' full lengths).
frac3 = [np.mean(f3[r] > 0.05) for r in range(3)]
check("ard-no-third-fibre", max(frac3) <= 0.15 and np.mean(f3 > 0.05) <= 0.10 and np.median(f3) < 0.02,
      "mean_f3samples > 0.05 in " + ", ".join(f"{100 * x:.0f}%" for x in frac3)
      + f" of {'/'.join(REGIONS)} voxels (at most 15% each, 10% in all); median {np.median(f3):.4f}")

# Angular errors, the fitted fibres matched to the true ones in the better order.
d1, d2 = maps["dyads1"], maps["dyads2"]
a1 = angle_deg(d1[0], dirs[0, 0])
check("angle-single", np.median(a1) < 10, f"median {np.median(a1):.2f} degrees")
for r in (1, 2):
    t1, t2 = dirs[0, r], dirs[1, r]
    same = angle_deg(d1[r], t1) + angle_deg(d2[r], t2)
    swapped = angle_deg(d1[r], t2) + angle_deg(d2[r], t1)
    e1 = np.where(swapped < same, angle_deg(d1[r], t2), angle_deg(d1[r], t1))
    e2 = np.where(swapped < same, angle_deg(d2[r], t1), angle_deg(d2[r], t2))
    check(f"angle-{REGIONS[r]}", max(np.median(e1), np.median(e2)) < 10,
          f"median {np.median(e1):.2f} and {np.median(e2):.2f} degrees")
dm, ds, s0 = maps["mean_dsamples"], maps["mean_d_stdsamples"], maps["mean_S0samples"]
check("d-and-S0", abs(np.median(dm) / D - 1) < 0.1 and abs(np.median(s0) / 1000 - 1) < 0.05,
      f"median d {np.median(dm):.3g} (truth {D:g}), S0 {np.median(s0):.4g} (truth 1000)")
check("d-std", abs(np.median(ds) / D_STD - 1) < 0.3 and (ds > 0).all() and (ds < dm).all(),
      f"median d_std {np.median(ds):.3g} (truth {D_STD:g}), range [{ds.min():.3g}, {ds.max():.3g}], "
      "every voxel in (0, d)")

# FSL's definitions, recomputed from the samples: mean_f = the mean of merged_f; dyads = the
# principal eigenvector of the mean dyadic tensor, dispersion = 1 - its largest eigenvalue
# (FSL's make_dyadic_vectors); th in [0, pi], ph in [0, 2 pi).
ok_mean = all(np.allclose(maps[f"merged_f{n}samples"].mean(axis=-1), maps[f"mean_f{n}samples"], atol=1e-4)
              for n in (1, 2, 3))
check("mean-f-is-mean-of-samples", ok_mean)
worst_angle, worst_disp = 0.0, 0.0
for n in (1, 2):
    th, ph = maps[f"merged_th{n}samples"], maps[f"merged_ph{n}samples"]
    v = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], axis=-1)
    tensor = np.einsum("...si,...sj->...ij", v, v) / th.shape[-1]
    evals, evecs = np.linalg.eigh(tensor)
    worst_angle = max(worst_angle, angle_deg(evecs[..., :, -1], maps[f"dyads{n}"]).max())
    worst_disp = max(worst_disp, np.abs(1 - evals[..., -1] - maps[f"dyads{n}_dispersion"]).max())
check("dyads-from-samples-as-fsl", worst_angle < 0.5 and worst_disp < 1e-3,
      f"largest angle {worst_angle:.3f} degrees, dispersion difference {worst_disp:.2g}")
th_all = np.concatenate([maps[f"merged_th{n}samples"].ravel() for n in (1, 2, 3)])
ph_all = np.concatenate([maps[f"merged_ph{n}samples"].ravel() for n in (1, 2, 3)])
check("angle-ranges", th_all.min() >= 0 and th_all.max() <= np.pi + 1e-6 and ph_all.min() >= 0
      and ph_all.max() <= 2 * np.pi + 1e-6, f"th in [{th_all.min():.3f}, {th_all.max():.3f}], "
      f"ph in [{ph_all.min():.3f}, {ph_all.max():.3f}]")
check("mask-copied", (maps["nodif_brain_mask"] == 1).all())

# The stages as their provenance records them: the gamma models, FSL's burn-in of 1000 sweeps
# shared out over the two MCMC stages, 1250 jumps sampled every 25 in the last.
stages = []
for model in ("ball_1_stick_gamma", "ball_2_sticks_gamma", "ball_3_sticks_gamma"):
    try:
        stages.append(json.load(open(os.path.join(out, "dimoc", model, "provenance.json")))["options"])
    except OSError as e:
        stages.append({"missing": str(e)})
mcmc = [s for s in stages if "mcmc" in s.get("method", "")]
ok = (len(mcmc) == 2 and sum(s["burnin"] for s in mcmc) == 1000 and mcmc[-1]["jumps"] == 1250
      and mcmc[-1]["sample_every"] == 25 and all(s["update_every"] == 40 and s["noise"] == "gaussian" for s in mcmc)
      and stages[0].get("method") == "lm")
check("stages-fsl-lengths", ok, "; ".join(f"{s.get('method')} burnin {s.get('burnin')} jumps {s.get('jumps')} "
                                          f"every {s.get('sample_every')}" for s in stages))

# Model 1 (sticks of one diffusivity), 2 fibres, other MCMC lengths: ball_2_sticks, 10 samples,
# no d_std, the crossings still found and ARD still off where there is one fibre.
out1 = os.path.join(d, "out1.bedpostX")
rc, _, err = dimoc("pipeline", "bedpostx", *inputs, "--out", out1, "--nfibres", 2, "--model", 1,
                   "--burnin", 500, "--jumps", 500, "--sample-every", 50, "--quiet", *extra, expect_ok=False)
if rc == 0:
    maps1, problems = fsl_files(out1, 2, 10, False)
    prov = json.load(open(os.path.join(out1, "dimoc", "ball_2_sticks", "provenance.json")))["options"]
    if not problems and (prov["burnin"], prov["jumps"], prov["sample_every"]) != (500, 500, 50):
        problems.append(f"ball_2_sticks ran burnin {prov['burnin']} jumps {prov['jumps']} every {prov['sample_every']}")
    if not problems:
        g = maps1["mean_f2samples"]
        single, cross = np.mean(g[0] > 0.05), min(np.mean(g[1] > 0.05), np.mean(g[2] > 0.05))
        if single > 0.10 or cross < 0.90:
            problems.append(f"mean_f2samples > 0.05 in {100 * single:.0f}% of single-fibre voxels, "
                            f"{100 * cross:.0f}% of crossings")
    check("model1-two-fibres", not problems, "; ".join(problems[:3]) or "ball_2_sticks, 10 samples, ARD as expected")
else:
    check("model1-two-fibres", False, err.strip()[-300:])

# Usage errors.
out4 = os.path.join(d, "out4.bedpostX")
rc, _, err = dimoc("pipeline", "bedpostx", *inputs, "--out", out4, "--nfibres", 4, expect_ok=False)
check("bad-nfibres", rc != 0 and "--nfibres must be 1, 2 or 3" in err and not os.path.exists(out4),
      err.strip())
rc, _, err = dimoc("pipeline", "bedpostx", *inputs, "--out", out4, "--model", 3, expect_ok=False)
lines = [x for x in err.strip().splitlines() if x]
check("model-3-not-available", rc != 0 and len(lines) == 1 and "--model 3" in err and "not available" in err
      and not os.path.exists(out4), err.strip())
rc, _, err = dimoc("pipeline", "bedpostx", *inputs, "--out", out4, "--model", 0, expect_ok=False)
check("bad-model", rc != 0 and "--model must be 1 or 2, not '0'" in err and not os.path.exists(out4), err.strip())
rc, _, err = dimoc("pipeline", "bedpostx", *inputs, "--out", out4, "--precision", "half", expect_ok=False)
check("bad-precision", rc != 0 and len(err.strip().splitlines()) == 1
      and "--precision must be float, double or auto, not 'half'" in err and not os.path.exists(out4), err.strip())
rc, _, err = dimoc("pipeline", "bedpostx", "--data", data, expect_ok=False)
check("usage-when-arguments-missing", rc != 0 and "--mask is required" in err, err.strip())
rc, _, err = dimoc("pipeline", "bedpostx", data, mask, bvals, bvecs, out4, expect_ok=False)
check("positional-arguments-refused", rc != 0 and "unexpected argument" in err and not os.path.exists(out4),
      err.strip())
rc, _, err = dimoc("pipeline", "no_such_pipeline", expect_ok=False)
check("unknown-pipeline", rc != 0 and "no pipeline named 'no_such_pipeline'" in err, err.strip())
rc, helptext, err = dimoc("help", "pipeline", "bedpostx", expect_ok=False)
check("help-pipeline", rc == 0 and "--nfibres N" in helptext and "[default: 3]" in helptext
      and "--model 1|2" in helptext and "--burnin N" in helptext and "--update-every N" in helptext, err.strip())
finish()
