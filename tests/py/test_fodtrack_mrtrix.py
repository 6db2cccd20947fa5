"""dimoc track --fod against MRtrix 3's tckgen, on fodsim's phantom (an arc crossing a straight
bundle at 70 degrees, a third bundle crossing that at 90, an oblique 2 mm grid) and on DIPY's
real small_64D (FOD from MRtrix's dwi2mask, dwi2response fa -- tournier takes 15 s here -- and
dwi2fod csd: the SAME image for both).

  0. fodsim's SH basis is MRtrix's: sh2amp's amplitudes of random coefficients; sh2peaks finds
     the phantom's single-bundle lobes along the world directions they were built on.
  1. For iFOD2, iFOD1 and SD_STREAM (default step, angle, cutoff): tckgen twice (MRTRIX_RNG_SEED
     far apart: MRtrix seeds thread k's generator with the seed + k, so seeds 1 and 2 share half
     their streamlines on 2 threads) and dimoc once, N streamlines from the same seed mask.
       tdi: TDIs of all three by `tckmap -template FOD`; r_self = corr(tckgen a, tckgen b),
         r_dimoc = the mean of corr(dimoc, a) and corr(dimoc, b): (1 - r_dimoc) <= 3 (1 - r_self);
       median-length: within 15% of tckgen's;
       length-distribution: two-sample KS test of the lengths against tckgen's, p > 1e-4;
       bundle-switching (phantom): the fractions of streamlines that visit both the arc's and the
         straight bundle's single-bundle cores (turning at the 70 degree crossing), and the third's
         and the straight's (90 degrees), within 4.5 binomial standard deviations of tckgen's;
       counts: header count = N = streamlines in the file; total_count (seeds tried) within 5
         standard deviations of tckgen's (a negative binomial count).
  2. The criteria discriminate (tckgen against tckgen): iFOD1 as the candidate against iFOD2 fails
     the length distribution and the bundle switching (it passes the TDI criterion: that one
     alone cannot tell iFOD1 from iFOD2 here); SD_STREAM fails the TDI criterion; iFOD2 with
     -angle 20 fails the median length.
  3. The same criteria with non-default options given to both (iFOD2: step 0.7, angle 30, cutoff
     0.2, power 0.5, samples 3; iFOD1: step 0.3, angle 25, seed cutoff 0.4, 50 attempts per seed).
  4. iFOD2 on small_64D as in 1 (no bundle criterion)."""
import os
import shutil
import time

import nibabel as nib
import numpy as np
from scipy.stats import ks_2samp

import csdsim as cs
import fodsim as fs
from dmtest import check, dimoc, finish, workdir

DATA = "/usr/lib/python3/dist-packages/dipy/data/files/small_64D"
RNG_A, RNG_B, RNG_C = 100000, 200000, 300000
# streamlines per run: r_self about 0.99 on the phantom (measured at 3000: 0.987-0.990)
N = {"ifod2": 4000, "ifod1": 4000, "sd_stream": 4000}
MRTRIX_NAME = {"ifod2": "iFOD2", "ifod1": "iFOD1", "sd_stream": "SD_Stream"}


def verify_basis(d, p):
    rng = np.random.default_rng(1)
    coef = rng.normal(size=(3, 2, 2, fs.nsh(fs.LMAX)))
    img = fs.save(f"{d}/random_sh.nii", coef, p["affine"])
    dirs = cs.random_unit(rng, 60)
    np.savetxt(f"{d}/dirs.txt", dirs)
    rc, _, err = fs.run(["sh2amp", "-quiet", "-force", img, f"{d}/dirs.txt", f"{d}/amp.nii"])
    amp = np.asarray(nib.load(f"{d}/amp.nii").dataobj, float) if rc == 0 else np.zeros(1)
    mine = fs.amplitude(np.asarray(nib.load(img).dataobj, float).reshape(-1, coef.shape[-1]), dirs)
    diff = np.abs(amp.reshape(mine.shape) - mine).max() if amp.size == mine.size else np.inf
    check("fodsim-basis-vs-sh2amp", rc == 0 and diff < 1e-5 * np.abs(mine).max(),
          f"max |fodsim - sh2amp| {diff:.2e} over 12 voxels x 60 directions (amplitudes up to "
          f"{np.abs(mine).max():.1f}); {err.strip()}")
    rc, _, err = fs.run(["sh2peaks", "-quiet", "-force", p["fod"], f"{d}/peaks.nii", "-num", 1])
    pk = np.asarray(nib.load(f"{d}/peaks.nii").dataobj, float)[..., :3]
    R = p["affine"][:3, :3] / fs.VOXEL
    w = p["weights"]
    worst = []
    for name, t in (("straight", [1.0, 0, 0]), ("third", [0, 1.0, 0])):
        alone = (w[name] > 0.9) & np.all([w[o] == 0 for o in w if o != name], axis=0)
        v = pk[alone]
        v /= np.linalg.norm(v, axis=1)[:, None]
        worst.append(np.degrees(np.arccos(np.clip(np.abs(v @ (R @ t)), 0, 1))).max())
    check("fodsim-lobes-world-frame-vs-sh2peaks", max(worst) < 0.5,
          f"largest angle sh2peaks vs the built world direction: straight {worst[0]:.3f}, third "
          f"{worst[1]:.3f} deg (the grid is rotated 25 deg)")


def tdi_of(tck, template, out):
    return fs.tckmap(tck, template, out)


class Run:
    """One tractogram's measures: TDI on the FOD grid, lengths (rounded to 0.01 mm: SD_STREAM's
    lengths are multiples of its step, and float noise must not split ties in a KS test), and
    which bundles' single-bundle cores each streamline visits (phantom only)."""

    def __init__(self, tck, fod, cores=None):
        self.tck = tck
        self.tdi = tdi_of(tck, fod, tck[:-4] + "_tdi.nii")
        sl = fs.streamlines(tck)
        self.n = len(sl)
        self.lengths = np.round(fs.lengths(sl), 2)
        self.header = fs.tck_header(tck)
        self.visits = None
        if cores:
            aff = nib.load(fod).affine
            pts = np.concatenate(sl)
            starts = np.cumsum([0] + [len(s) for s in sl[:-1]])
            self.visits = {k: np.maximum.reduceat(fs.in_mask(m, aff, pts), starts) for k, m in cores.items()}

    def fraction(self, a, b):
        return np.mean(self.visits[a] & self.visits[b]), self.n


PAIRS = (("arc", "straight"), ("third", "straight"))


def criteria(x, a, b):
    """The criteria of a tractogram x against two tckgen runs a, b: {name: (ok, detail)}."""
    out = {}
    r_self = fs.corr(a.tdi, b.tdi)
    r = (fs.corr(x.tdi, a.tdi) + fs.corr(x.tdi, b.tdi)) / 2
    out["tdi"] = ((1 - r) <= 3 * (1 - r_self),
                  f"r_dimoc {r:.4f} (vs a {fs.corr(x.tdi, a.tdi):.4f}, vs b {fs.corr(x.tdi, b.tdi):.4f}), r_self "
                  f"{r_self:.4f}: (1 - r_dimoc) / (1 - r_self) = {(1 - r) / (1 - r_self):.2f} (at most 3)")
    ref = np.concatenate([a.lengths, b.lengths])
    med, med_mr = np.median(x.lengths), np.median(ref)
    out["median-length"] = (abs(med / med_mr - 1) <= 0.15,
                            f"{med:.1f} mm, tckgen {med_mr:.1f} mm ({100 * (med / med_mr - 1):+.1f}%, at most 15%); "
                            f"quartiles {np.percentile(x.lengths, 25):.1f}/{np.percentile(x.lengths, 75):.1f}, tckgen "
                            f"{np.percentile(ref, 25):.1f}/{np.percentile(ref, 75):.1f}")
    p = ks_2samp(x.lengths, ref).pvalue
    out["length-distribution"] = (p > 1e-4, f"two-sample KS against tckgen's {len(ref)} lengths: p = {p:.2g} "
                                            f"(at least 1e-4)")
    if x.visits is not None:
        z, txt = [], []
        for u, v in PAIRS:
            f, n = x.fraction(u, v)
            fa, na = a.fraction(u, v)
            fb, nb = b.fraction(u, v)
            f0 = (fa * na + fb * nb) / (na + nb)
            sd = np.sqrt(max(f0 * (1 - f0), 1e-12) * (1 / n + 1 / (na + nb)))
            z.append((f - f0) / sd)
            txt.append(f"{u}+{v} {f:.4f} vs {f0:.4f} (z {z[-1]:+.1f})")
        out["bundle-switching"] = (max(np.abs(z)) <= 4.5,
                                   "fraction of streamlines through both bundles' cores: " + ", ".join(txt) +
                                   " (|z| at most 4.5)")
    return out


def compare(name, d, fod, seed, alg, n, cores=None, options=()):
    """tckgen twice, dimoc once; the criteria.  options: (dimoc option, tckgen option, value)
    triples given to both.  Returns the two tckgen runs."""
    mr = MRTRIX_NAME[alg]
    mr_opts = [x for o in options for x in (o[1], o[2])]
    dm_opts = [x for o in options for x in (o[0], o[2])]
    t0 = time.time()
    a = fs.tckgen(fod, f"{d}/{name}_a.tck", seed, "-algorithm", mr, "-select", n, *mr_opts, rng=RNG_A)
    t_a = time.time() - t0
    b = fs.tckgen(fod, f"{d}/{name}_b.tck", seed, "-algorithm", mr, "-select", n, *mr_opts, rng=RNG_B)
    out = f"{d}/{name}_dimoc"
    t0 = time.time()
    rc, _, err = dimoc("track", "--fod", fod, "--seed", seed, "--out", out, "--algorithm", alg, "--select", n,
                       "--rseed", 7, "--threads", 2, "--device", "cpu", *dm_opts, expect_ok=False)
    t_d = time.time() - t0
    a, b = Run(a, fod, cores), Run(b, fod, cores)
    print(f"     {name}: tckgen {t_a:.1f} s, dimoc {t_d:.1f} s for {n} streamlines; r_self "
          f"{fs.corr(a.tdi, b.tdi):.4f}; median length tckgen {np.median(a.lengths):.1f} / "
          f"{np.median(b.lengths):.1f} mm")
    check(f"{name}-dimoc-runs", rc == 0, err.strip().splitlines()[-1] if err.strip() else "")
    if rc:
        return a, b
    x = Run(f"{out}/tracks.tck", fod, cores)
    for crit, (ok, detail) in criteria(x, a, b).items():
        check(f"{name}-{crit}", ok, "dimoc " + detail)
    count = int(x.header.get("count", -1))
    totals = [int(r.header["total_count"]) for r in (a, b)]
    p = 2 * n / sum(totals)  # tckgen's fraction of seeds kept
    sd = np.sqrt(n * (1 - p)) / p  # seeds needed for n successes: negative binomial
    total_d = int(x.header.get("total_count", -1))
    check(f"{name}-counts", count == n == x.n and abs(total_d - np.mean(totals)) <= 5 * sd * np.sqrt(1.5) + 2,
          f"header count {count}, nibabel {x.n} (want {n}); total_count dimoc {total_d}, tckgen {totals} "
          f"(sd {sd:.1f})")
    return a, b


def sensitivity(d, fod, seed, runs, cores):
    """Each criterion fails for tckgen runs that differ from the reference: tckgen iFOD1 and
    SD_STREAM against tckgen iFOD2 (the runs of compare()), tckgen iFOD2 -angle 20."""
    a, b = runs["ifod2"]
    fails = {}
    for name, x in (("ifod1", runs["ifod1"][0]), ("sd_stream", runs["sd_stream"][0])):
        res = criteria(x, a, b)
        fails[name] = [c for c, (ok, _) in res.items() if not ok]
        for c, (ok, detail) in res.items():
            print(f"     sensitivity: tckgen {name} as the candidate, {c}: {'pass' if ok else 'FAILS'}: {detail}")
    e = Run(fs.tckgen(fod, f"{d}/angle20.tck", seed, "-select", 1000, "-angle", 20, rng=RNG_C), fod, cores)
    res = criteria(e, a, b)
    fails["angle20"] = [c for c, (ok, _) in res.items() if not ok]
    print(f"     sensitivity: tckgen -angle 20, median-length: {res['median-length'][1]}")
    check("sensitivity-ifod1-vs-ifod2-fails", {"length-distribution", "bundle-switching"} <= set(fails["ifod1"]),
          f"tckgen iFOD1 against tckgen iFOD2 fails {fails['ifod1']} (want length-distribution, bundle-switching)")
    check("sensitivity-sd_stream-vs-ifod2-fails", "tdi" in fails["sd_stream"],
          f"tckgen SD_STREAM against tckgen iFOD2 fails {fails['sd_stream']} (want tdi)")
    check("sensitivity-angle20-fails", "median-length" in fails["angle20"],
          f"tckgen iFOD2 -angle 20 against -angle 45 fails {fails['angle20']} (want median-length)")


def real_data(d):
    bvecs = f"{d}/bvecs"
    np.savetxt(bvecs, np.nan_to_num(np.loadtxt(DATA + ".bvec")), fmt="%.17g")
    grad = ["-fslgrad", bvecs, DATA + ".bval"]
    mask = f"{d}/mask.nii"
    rcs = [cs.mrtrix("dwi2mask", DATA + ".nii", *grad, mask),
           cs.mrtrix("dwi2response", "fa", DATA + ".nii", *grad, f"{d}/wm.txt", "-mask", mask),
           cs.mrtrix("dwi2fod", "csd", DATA + ".nii", *grad, f"{d}/wm.txt", f"{d}/fod.nii", "-mask", mask,
                     "-lmax", 8)]
    if any(rc for rc, _ in rcs):
        check("real-mrtrix-fod", False, " ".join(e for _, e in rcs))
        return
    print(f"     small_64D: {int((np.asarray(nib.load(mask).dataobj) > 0).sum())} voxels in dwi2mask's mask")
    compare("real-ifod2", d, f"{d}/fod.nii", mask, "ifod2", 6000)


def main():
    if not all(shutil.which(t) for t in ("tckgen", "tckmap", "sh2amp", "sh2peaks", "dwi2fod")):
        check("fodtrack-mrtrix-available", False, "MRtrix3 not found: scripts/install-deps.sh installs mrtrix3")
        finish()
    d = workdir("fodtrack_mrtrix")
    p = fs.phantom(d)
    verify_basis(d, p)
    rc, out, _ = dimoc("help", "track", expect_ok=False)
    if rc != 0 or "--fod" not in out:
        check("fodtrack-command-exists", False, "`dimoc help track` has no --fod")
    w = p["weights"]
    cores = {k: (w[k] > 0.5) & np.all([w[o] == 0 for o in w if o != k], axis=0) for k in w}
    runs = {}
    for alg in ("ifod2", "ifod1", "sd_stream"):
        runs[alg] = compare(alg, d, p["fod"], p["wm"], alg, N[alg], cores)
    sensitivity(d, p["fod"], p["wm"], runs, cores)
    # the options mean what tckgen's mean (all criteria again, with non-default values)
    compare("ifod2-options", d, p["fod"], p["wm"], "ifod2", 2000, cores,
            [("--step", "-step", 0.7), ("--angle", "-angle", 30), ("--cutoff", "-cutoff", 0.2),
             ("--power", "-power", 0.5), ("--samples", "-samples", 3)])
    compare("ifod1-options", d, p["fod"], p["wm"], "ifod1", 2000, cores,
            [("--step", "-step", 0.3), ("--angle", "-angle", 25), ("--seed-cutoff", "-seed_cutoff", 0.4),
             ("--max-attempts-per-seed", "-max_attempts_per_seed", 50)])
    os.makedirs(f"{d}/real")
    real_data(f"{d}/real")
    finish()


if __name__ == "__main__":
    main()
