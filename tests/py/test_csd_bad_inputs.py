"""dimoc response / dimoc csd refuse bad inputs: each case must exit non-zero (a status from 1 to
125, not a crash), print exactly one non-empty line on stderr that names the file or option at
fault (the substrings listed per case), and leave no output folder behind.

Inputs: 4x4x3 voxels of single-fibre signals (S0 1000) on an oblique grid, single shell
(2 b=0 + 60 b=1000), multi-shell (2 b=0 + 60 b=1000 + 60 b=2000) and 12 directions (1 b=0 +
12 b=1000); responses written by csdsim.write_response."""
import os

import numpy as np

import csdsim as cs
from dmtest import check, dimoc, finish, save, workdir

SHAPE = (4, 4, 3)


def dataset(d, name, spec, iso=None):
    """Single-fibre voxels; iso: a boolean (SHAPE) array of voxels given an isotropic signal."""
    bvals, bvecs = f"{d}/{name}.bval", f"{d}/{name}.bvec"
    dimoc("scheme", "--shells", spec, "--bvals", bvals, "--bvecs", bvecs)
    b, g = np.loadtxt(bvals), np.loadtxt(bvecs)
    aff = cs.oblique_affine(SHAPE)
    rng = np.random.default_rng(4)
    n = int(np.prod(SHAPE))
    y = 1000 * cs.fibre_signal(b, cs.fsl_to_world(aff, g), cs.random_unit(rng, n))
    if iso is not None:
        y[iso.ravel()] = 1000 * np.exp(-b * 1.0e-3)
    data = save(f"{d}/{name}.nii.gz", y.reshape(SHAPE + (len(b),)), aff)
    return data, bvals, bvecs, aff


def expect_error(name, cmd, args, must, out):
    """must: a list of alternatives, each a string or a tuple of strings all required."""
    out = f"{out}_{cmd}_{name}"
    rc, _, err = dimoc(cmd, *args, "--out", out, expect_ok=False)
    e = err.strip()
    named = any(all(s in e for s in ((m,) if isinstance(m, str) else m)) for m in must)
    ok = 0 < rc < 126 and e != "" and "\n" not in e and named and not os.path.exists(out)
    why = []
    if not 0 < rc < 126:
        why.append(f"exit status {rc}")
    if e == "" or "\n" in e:
        why.append(f"{len(e.splitlines())} lines on stderr (one wanted)")
    if not named:
        why.append(f"does not name any of {must}")
    if os.path.exists(out):
        why.append("output folder created")
    check(f"{cmd}-{name}", ok, (e if ok else "; ".join(why) + f" | stderr: {e}"))
    return ok


def main():
    d = workdir("csd_bad_inputs")
    for c in ("csd", "response"):
        rc, _, _ = dimoc("help", c, expect_ok=False)
        if rc != 0:
            check(f"{c}-command-exists", False, f"`dimoc help {c}` fails: no {c} command yet")
    out = f"{d}/out"
    ss, ss_bvals, ss_bvecs, aff = dataset(d, "single", "2x0,60x1000")
    ms, ms_bvals, ms_bvecs, _ = dataset(d, "multi", "2x0,60x1000,60x2000")
    few, few_bvals, few_bvecs, _ = dataset(d, "few", "1x0,12x1000")
    S = ["--data", ss, "--bvals", ss_bvals, "--bvecs", ss_bvecs]
    M = ["--data", ms, "--bvals", ms_bvals, "--bvecs", ms_bvecs]
    F = ["--data", few, "--bvals", few_bvals, "--bvecs", few_bvecs]
    wm1 = cs.write_response(f"{d}/wm_1shell.txt", [1000], 8, "wm", 1000)
    wm3 = cs.write_response(f"{d}/wm_3shell.txt", [0, 1000, 2000], 8, "wm", 1000)
    wm1_12 = cs.write_response(f"{d}/wm_1shell_lmax12.txt", [1000], 12, "wm", 1000)
    gm1 = cs.write_response(f"{d}/gm_1shell.txt", [1000], 0, "gm", 1000)
    csf1 = cs.write_response(f"{d}/csf_1shell.txt", [1000], 0, "csf", 1000)
    short = f"{d}/short.bval"
    np.savetxt(short, np.loadtxt(ss_bvals)[:-1][None], fmt="%g")
    one = np.zeros(SHAPE)
    one[1, 1, 1] = 1
    one_mask = save(f"{d}/one_voxel_mask.nii.gz", one, aff)
    iso = np.zeros(SHAPE, bool)
    iso[:2] = True
    isod, isod_bvals, isod_bvecs, _ = dataset(d, "iso", "2x0,60x1000", iso)
    iso_mask = save(f"{d}/isotropic_mask.nii.gz", iso.astype(np.float32), aff)
    bad_resp = f"{d}/garbage_response.txt"
    open(bad_resp, "w").write("# Shells: 1000\n1000 -300 abc 20\n")

    # dimoc csd
    expect_error("multi-row-response-single-shell-data", "csd", S + ["--response", wm3],
                 ["wm_3shell.txt"], out)
    expect_error("msmt-one-row-responses-multi-shell-data", "csd",
                 M + ["--msmt", "--response", ",".join([wm1, gm1, csf1])],
                 ["wm_1shell.txt", "gm_1shell.txt", "csf_1shell.txt"], out)
    expect_error("lmax-too-high-for-directions", "csd", F + ["--response", wm1_12, "--lmax", 12],
                 ["--lmax", ("lmax", "12")], out)
    expect_error("lmax-odd", "csd", S + ["--response", wm1, "--lmax", 7], ["--lmax", ("lmax", "7")], out)
    expect_error("data-bvals-length", "csd", ["--data", ss, "--bvals", short, "--bvecs", ss_bvecs,
                                              "--response", wm1], ["short.bval"], out)
    expect_error("missing-data", "csd", ["--data", f"{d}/nope.nii.gz", "--bvals", ss_bvals, "--bvecs", ss_bvecs,
                                         "--response", wm1], ["nope.nii.gz"], out)
    expect_error("missing-response", "csd", S + ["--response", f"{d}/no_such_response.txt"],
                 ["no_such_response.txt"], out)
    expect_error("unreadable-response", "csd", S + ["--response", bad_resp], ["garbage_response.txt"], out)
    expect_error("unknown-option", "csd", S + ["--bogus", "1"], [("--bogus", "dimoc help csd")], out)
    expect_error("bad-precision", "csd", S + ["--response", wm1, "--precision", "half"],
                 ["--precision", "half"], out)
    expect_error("mask-of-another-grid", "csd", S + ["--response", wm1, "--mask",
                                                    save(f"{d}/small_mask.nii.gz", np.ones((3, 3, 3)))],
                 ["small_mask.nii.gz"], out)

    expect_error("estimation-mask-of-isotropic-voxels", "csd", ["--data", isod, "--bvals", isod_bvals, "--bvecs",
                                                               isod_bvecs, "--mask", iso_mask],
                 ["isotropic_mask.nii.gz", "voxel"], out)

    # dimoc response
    expect_error("lmax-too-high-for-directions", "response", F + ["--lmax", 12], ["--lmax", ("lmax", "12")], out)
    expect_error("lmax-odd", "response", S + ["--lmax", 9], ["--lmax", ("lmax", "9")], out)
    expect_error("mask-of-one-voxel", "response", S + ["--mask", one_mask],
                 ["one_voxel_mask.nii.gz", "voxel"], out)
    expect_error("mask-of-isotropic-voxels", "response", ["--data", isod, "--bvals", isod_bvals, "--bvecs",
                                                          isod_bvecs, "--mask", iso_mask],
                 ["isotropic_mask.nii.gz", "voxel"], out)
    expect_error("data-bvals-length", "response", ["--data", ss, "--bvals", short, "--bvecs", ss_bvecs],
                 ["short.bval"], out)
    expect_error("missing-bvecs-file", "response", ["--data", ss, "--bvals", ss_bvals, "--bvecs", f"{d}/nope.bvec"],
                 ["nope.bvec"], out)
    expect_error("unknown-algorithm", "response", S + ["--algorithm", "magic"], ["magic", "--algorithm"], out)
    expect_error("unknown-option", "response", S + ["--bogus", "1"], [("--bogus", "dimoc help response")], out)

    # Sanity: the same inputs, corrected, succeed (so the refusals above are about the fault).
    for cmd, args in (("csd", S + ["--response", wm1]), ("response", S + ["--algorithm", "tournier"])):
        rc, _, err = dimoc(cmd, *args, "--out", f"{d}/good_{cmd}", expect_ok=False)
        check(f"{cmd}-good-inputs-accepted", rc == 0, err.strip() or "ok")
    finish()


if __name__ == "__main__":
    main()
