"""dimoc commit's solver on the GPU against the host's (make test-gpu), on commitpeer's phantom
(three bundles, false streamlines, 2% noise): the same dictionary, operator and FISTA loop, A x
summed in the same order (--fmad=false) and A^T y and the norms reduced in another, so the
streamline weights agree to 1e-6 (relative to the largest: the float bound), with the
same number of iterations, at COMMIT's tolerances and run to convergence; the maps agree to
1e-6; the provenance names the GPU (no quiet fallback to the CPU); and the same for --model
volume-fractions (no zeppelins, no balls), for --model cylinder-zeppelin-ball (4 radii: 4 IC
columns per streamline; its default four zeppelins per peak, and two), for several zeppelins per
peak with the stick (--d-perp with three values: three EC columns per peak), for the
regularisations (--lambda, --lambda-group with --groups, and
both), with --confidence-map and --iso-mask (rows weighted, balls in some voxels only) and the
lesion model (volume-fractions with --iso-mask); and the lassos on the EC and ISO blocks
(--lambda-ec, --lambda-iso, all three lassos together) and the lasso and group lasso with the
cylinders (4 IC columns per streamline); the weighted lassos (--lambda-weights, also with the
sparse group lasso and the cylinders, --lambda-iso-weights), blocks without the non-negativity
(--allow-negative, with the lasso and the group lasso) and the refit on the support (--debias,
also with a confidence map: y re-uploaded, IC columns left out of A^T).  The dictionary cut on the
GPU (templates/commit/commit_walk.h, one source with the host's) is the host's bit for bit: the
saved dictionaries of --stage dictionary on both devices, on the phantom's tractogram and on
random walks with steps of every length (zero, sub-voxel, over 16 voxels), out of the image and
across the mask, with --fiber-shift; and a whole run says that its dictionary was cut on the GPU.
Needs no COMMIT."""
import json
import os
import sys

import nibabel as nib
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
import commitpeer as cp  # noqa: E402
from dmtest import check, dimoc, finish, workdir  # noqa: E402


def run(p, out, device, *extra):
    if "volume-fractions" in extra:  # a 3D map: no scheme, no peaks
        dimoc("commit", "--tractogram", p["tck"], "--data", p["ic_true"], "--mask", p["wm"], "--out", out,
              "--device", device, *extra)
    else:
        dimoc("commit", "--tractogram", p["tck"], "--data", p["dwi"], "--mask", p["wm"], "--bvals",
              p["bvals_file"], "--bvecs", p["bvecs_file"], "--peaks", p["peaks"], "--out", out,
              "--device", device, *extra)
    r = {k: np.asarray(nib.load(f"{out}/{k}.nii.gz").dataobj, float)
         for k in ("compartment_IC", "compartment_EC", "compartment_ISO", "fit_NRMSE")}
    r["w"] = np.loadtxt(f"{out}/streamline_weights.txt")
    r["prov"] = json.load(open(f"{out}/provenance.json"))["results"]
    return r


def random_walks(path, shape, n, seed):
    """n walks in world mm (the phantom's grid, 2 mm voxels about the origin): steps from 0 to
    40 mm, some leaving the image, a few of one point or with repeated points."""
    rng = np.random.default_rng(seed)
    box = np.array(shape, float) * cp.VOXEL
    lines = []
    for i in range(n):
        m = int(rng.integers(1, 80))
        start = rng.uniform(-0.6, 0.6, 3) * box
        steps = rng.normal(size=(m, 3)) * rng.choice([0.05, 0.5, 1.5, 12.0], size=(m, 1), p=[.1, .5, .3, .1])
        steps[rng.uniform(size=m) < 0.05] = 0  # repeated points
        lines.append((start + np.cumsum(steps, axis=0)).astype(np.float32))
    cp.write_tck(path, lines)


def dictionary_on_both(d, p):
    """--stage dictionary on both devices: the same saved dictionary, byte for byte."""
    random_walks(f"{d}/walks.tck", nib.load(p["wm"]).shape, 20000, 5)
    for label, tck, extra in (("phantom", p["tck"], ()),
                              ("walks", f"{d}/walks.tck", ()),
                              ("walks_shifted", f"{d}/walks.tck", ("--fiber-shift", "0.3,-0.2,0.45"))):
        out = {}
        for dev in ("cpu", "gpu"):
            out[dev] = f"{d}/dict_{label}_{dev}"
            dimoc("commit", "--tractogram", tck, "--data", p["dwi"], "--mask", p["wm"], "--stage",
                  "dictionary", "--out", out[dev], "--device", dev, *extra)
        prov = {dev: json.load(open(f"{out[dev]}/provenance.json"))["results"] for dev in out}
        same = all(open(f"{out['cpu']}/{f}", "rb").read() == open(f"{out['gpu']}/{f}", "rb").read()
                   for f in ("dictionary.bin", "dictionary_header.bin"))
        check(f"commit_gpu_dictionary_{label}", same and prov["gpu"]["dictionary_device"] == "gpu"
              and prov["cpu"]["dictionary_device"] == "cpu" and prov["gpu"]["segments"] > 1000,
              f"{prov['gpu']['segments']:.0f} segments of {prov['gpu']['streamlines_kept']:.0f} "
              f"streamlines, {'the same bytes' if same else 'DIFFERENT'} on {prov['gpu']['device']}")


def main():
    d = workdir("commit_gpu")
    p = cp.phantom(f"{d}/phantom", noise=0.02)
    dictionary_on_both(d, p)
    # cylinders: several IC columns per streamline (one per radius), G from each b
    scheme = cp.write_scheme_st(f"{d}/dwi.scheme", p["bvals"], p["g_world"], 0.03, 0.01)
    cylinders = ("--model", "cylinder-zeppelin-ball", "--scheme", scheme, "--radii", "0.5,2,4,8")
    aff, shape4 = nib.load(p["dwi"]).affine, nib.load(p["dwi"]).shape
    conf = np.random.default_rng(3).uniform(0.2, 1.0, shape4).astype(np.float32)
    nib.save(nib.Nifti1Image(conf, aff), f"{d}/conf.nii.gz")
    iso = np.zeros(shape4[:3], np.float32)
    iso[: shape4[0] // 2] = 1
    nib.save(nib.Nifti1Image(iso, aff), f"{d}/iso.nii.gz")
    for label, extra in (("default", ()), ("converged", ("--tol", "1e-9", "--tol-x", "1e-12",
                                                          "--max-iter", "3000")),
                         ("volume_fractions", ("--model", "volume-fractions")),
                         ("cylinders", cylinders),
                         ("cylinders_two_zeppelins", (*cylinders, "--d-perp", "0.51e-3,0.17e-3")),
                         ("zeppelins", ("--d-perp", "0.85e-3,0.51e-3,0.17e-3")),
                         ("confidence_iso_mask", ("--confidence-map", f"{d}/conf.nii.gz",
                                                  "--iso-mask", f"{d}/iso.nii.gz")),
                         ("lesion", ("--model", "volume-fractions", "--iso-mask",
                                     f"{d}/iso.nii.gz"))):
        c = run(p, f"{d}/cpu_{label}", "cpu", *extra)
        g = run(p, f"{d}/gpu_{label}", "gpu", *extra)
        check(f"commit_gpu_ran_on_gpu_{label}", c["prov"]["device"] == "cpu" and "sm_" in g["prov"]["device"]
              and c["prov"].get("ec_responses") == g["prov"].get("ec_responses")
              and (c["prov"]["dictionary_device"], g["prov"]["dictionary_device"]) == ("cpu", "gpu"),
              f"{g['prov']['device']}; {g['prov'].get('ec_responses')} zeppelins per peak")
        dw = np.abs(c["w"] - g["w"]).max() / np.abs(c["w"]).max()
        check(f"commit_gpu_weights_{label}", dw < 1e-6 and c["prov"]["iterations"] == g["prov"]["iterations"],
              f"largest difference {dw:.2e} of the largest weight; {c['prov']['iterations']} and "
              f"{g['prov']['iterations']} iterations")
        do = abs(c["prov"]["objective"] - g["prov"]["objective"]) / c["prov"]["objective"]
        maps = ("compartment_IC", "compartment_EC", "compartment_ISO", "fit_NRMSE")
        dm = max(np.abs(c[k] - g[k]).max() / max(np.abs(c[k]).max(), 1e-30) for k in maps)
        check(f"commit_gpu_maps_{label}", do < 1e-9 and dm < 1e-6, f"objective {do:.1e}, maps {dm:.1e} (relative)")
    # the regularisations: the lasso, COMMIT2's group lasso over the phantom's five bundles, and
    # both (the sparse group lasso), the same on both devices
    names = sorted(set(p["label"]))
    np.savetxt(f"{d}/groups.txt", [names.index(n) for n in p["label"]], fmt="%d")
    groups = ("--groups", f"{d}/groups.txt")
    # the weighted lassos' weights: per streamline, and an image for the balls
    np.savetxt(f"{d}/w_ic.txt", np.random.default_rng(4).uniform(0.5, 3.0, len(p["label"])), fmt="%.9g")
    w_iso = np.ones(shape4[:3], np.float32)
    w_iso[: shape4[0] // 2] = 4
    nib.save(nib.Nifti1Image(w_iso, aff), f"{d}/w_iso.nii.gz")
    w_ic = ("--lambda-weights", f"{d}/w_ic.txt")
    for label, extra in (("lasso", ("--lambda", "0.05")),
                         ("group_lasso", ("--lambda-group", "0.1", *groups)),
                         ("sparse_group_lasso", ("--lambda", "0.02", "--lambda-group", "0.05",
                                                 *groups)),
                         ("lasso_ec", ("--lambda-ec", "0.05")),
                         ("lasso_iso", ("--lambda-iso", "0.05")),
                         ("lasso_all_blocks", ("--lambda", "0.02", "--lambda-ec", "0.05",
                                               "--lambda-iso", "0.05")),
                         ("cylinders_lasso", (*cylinders, "--lambda", "0.05")),
                         ("cylinders_group_lasso", (*cylinders, "--lambda-group", "0.1", *groups)),
                         ("lasso_iso_confidence", ("--lambda-iso", "0.05", "--confidence-map",
                                                   f"{d}/conf.nii.gz", "--iso-mask",
                                                   f"{d}/iso.nii.gz")),
                         ("lasso_weighted", ("--lambda", "0.05", *w_ic)),
                         ("lasso_iso_weighted", ("--lambda-iso", "0.05", "--lambda-iso-weights",
                                                 f"{d}/w_iso.nii.gz")),
                         ("sparse_group_lasso_weighted", ("--lambda", "0.005", "--lambda-group",
                                                          "0.05", *groups, *w_ic)),
                         ("cylinders_lasso_weighted", (*cylinders, "--lambda", "0.05", *w_ic)),
                         ("negative_ec_iso", ("--lambda-iso", "0.05", "--allow-negative", "ec,iso")),
                         ("negative_ic_group_lasso", ("--lambda-group", "0.1", *groups,
                                                      "--allow-negative", "ic")),
                         ("debias", ("--lambda", "0.05", "--debias")),
                         ("debias_confidence", ("--lambda", "0.05", "--lambda-iso", "0.05", "--debias",
                                                "--confidence-map", f"{d}/conf.nii.gz"))):
        c = run(p, f"{d}/cpu_{label}", "cpu", *extra)
        g = run(p, f"{d}/gpu_{label}", "gpu", *extra)
        dw = np.abs(c["w"] - g["w"]).max() / np.abs(c["w"]).max()
        do = abs(c["prov"]["objective"] - g["prov"]["objective"]) / c["prov"]["objective"]
        # some streamline kept (a lambda that zeroes every weight would compare nothing)
        check(f"commit_gpu_{label}", "sm_" in g["prov"]["device"] and np.abs(c["w"]).max() > 0
              and dw < 1e-6
              and do < 1e-9
              and c["prov"]["iterations"] == g["prov"]["iterations"],
              f"{g['prov']['device']}: weights {dw:.2e} of the largest, objective {do:.1e} "
              f"(relative), {c['prov']['iterations']} and {g['prov']['iterations']} iterations")
    finish()


if __name__ == "__main__":
    main()
