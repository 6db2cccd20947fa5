"""dimoc track --fod with Anatomically-Constrained Tractography (--act 5TT, --backtrack,
--crop-at-gmwmi, --seed-gmwmi) against MRtrix 3's tckgen (-act, -backtrack, -crop_at_gmwmi,
-seed_gmwmi) with the SAME FOD and 5TT images, on fodsim's phantom (an arc crossing a straight
bundle at 70 degrees, a third bundle crossing that at 90, an oblique 2 mm grid; here with an
isotropic FOD floor of 0.02 everywhere, below the ACT cutoff 0.05, so that no voxel is all zero
and streamlines stop on tissue, not on MRtrix's all-zero-voxel mask) and fodsim.five_tissue's
5TT: cortical GM in a shell where the bundles end, a sub-cortical GM ball on the straight bundle,
WM in the bundles, CSF between them and around the brain, smooth partial-volume boundaries.

  0. The phantom: 5ttcheck passes ("checked OK"); 5tt2gmwmi's GMWMI seed image equals its
     definition (per axis, the smaller of the GM and WM changes across the voxel) computed here.
  1. --act, seeds in the WM mask (iFOD2 and iFOD1): tckgen twice (MRTRIX_RNG_SEED 100000 apart)
     and dimoc once, N streamlines each:
       tdi: (1 - r_dimoc) <= 3 (1 - r_self) with tckmap -template FOD's TDIs (as
         test_fodtrack_mrtrix.py);  median-length within 15%;  length-distribution: KS p > 1e-3;
       endpoint-tissue: the fraction of endpoints in cGM, sGM, WM and CSF (the 5TT's largest volume
         at the endpoint's nearest voxel) within 4.5 binomial standard deviations of tckgen's
         (streamlines as the unit: its two ends are not independent);
       ends-in-gm: every streamline has both ends in GM by the 5TT interpolated trilinearly at the
         end (cGM + sGM >= WM - 0.005, tckgen's rule for ENTER_CGM and for sub-cortical ends), or
         at the image edge: tckgen's do (control), so dimoc's must;
       csf-ends: dimoc's fraction of endpoints in CSF voxels at most tckgen's + 4.5 sd;
       acceptance: total_count (streamlines kept + rejected by ACT or length) within 5 sd of
         tckgen's (negative binomial: ACT rejects half the streamlines here).
  2. --crop-at-gmwmi (iFOD2 and iFOD1; one tckgen run each): of the endpoints on the cortical side
     (interpolated cGM >= sGM) the fraction AT the interface, |GM - WM| <= 0.011 interpolated
     (tckgen's bisection stops at |GM - WM| < 0.01), within 4.5 sd of tckgen's (about 93%; about
     8% without cropping: the uncropped run fails this criterion, as a control; tckgen leaves an
     end where the streamline came from sub-cortical GM, as no interface lies in its last step);
     grey-side: of the ends at the interface, those on its WM side (GM - WM < -1e-4) as few as
     tckgen's (none: its bisection keeps the last point with GM >= WM); KS of the |GM - WM|
     distributions (values at the interface counted as 0) p > 1e-3; ends-in-gm.
  3. --backtrack (iFOD2): acceptance count / total_count within 5 sd of tckgen -backtrack's,
     and higher than without --backtrack by as much as tckgen's (about 0.43 -> 0.93); its
     streamlines still end in GM (ends-in-gm), median length within 15% of tckgen's.
  4. --seed-gmwmi GMWMI (iFOD2): as 1 against tckgen -seed_gmwmi; and seed-end-at-interface: the
     fraction of streamlines with an end at the interface (|GM - WM| <= 0.011) within 4.5 sd of
     tckgen's (about 92%: tckgen puts the seed on the interface's grey side, 0 <= GM - WM < 0.01,
     where ACT tracks it one way only, into the WM, so the seed is an end).
  5. The .tck header's act (the 5TT's name), backtrack and crop_at_gmwmi entries as tckgen's (in
     1 to 4).  ACT defaults, from the runs of 1: the .tck header's threshold and init_threshold 0.05,
     min_dist 4 (2 x voxel), max_dist 200, as tckgen's header; provenance.json's cutoff 0.05 and
     min_length_mm 4;  --cutoff 0.1 stays 0.1 (tckgen's -cutoff 0.1 likewise), min_dist still 4;
     streamlines shorter than 10 mm (the non-ACT minimum 5 x voxel) exist, in tckgen's proportion;
     --max-length 30: no streamline longer, none of exactly 30 mm (ACT rejects them, tckgen too;
     without ACT iFOD2 cuts them at exactly 30), the fraction longer than 29 mm and total_count as
     tckgen's.
  6. Bad inputs: --act with a 3-D image or a 4-D image of 4 volumes: one error line naming the
     file, non-zero exit, no --out folder; --seed-gmwmi without --act, --backtrack with
     --algorithm sd_stream: errors (tckgen refuses all four: checked as controls).

Tolerances, calibrated with tckgen as the candidate (5 more MRTRIX_RNG_SEEDs per section, against
the same a, b): every criterion passed; largest |z| of endpoint-tissue 1.5, of at-interface 1.1,
of seed-end-at-interface 0.6; TDI ratio at most 1.06; KS p at least 0.027; total_count within
2.3 sd.  About 45 s on 2 cores (tckgen about 30 s of it)."""
import os
import shutil
import time

import nibabel as nib
import numpy as np
from scipy.stats import ks_2samp

import fodsim as fs
from dmtest import check, dimoc, finish, workdir

RNG_A, RNG_B = 100000, 200000
FLOOR = 0.02
N = {"ifod2": 1500, "ifod1": 2000, "gmwmi": 1500, "crop": 1000, "backtrack": 1000, "small": 300}
MRTRIX_NAME = {"ifod2": "iFOD2", "ifod1": "iFOD1", "sd_stream": "SD_Stream"}
CLASSES = ("cGM", "sGM", "WM", "CSF")  # 5TT volumes 0..3 (pathology, 4, is 0 everywhere here)
EPS_GM = 0.005  # an end is in GM if cGM + sGM >= WM - EPS_GM (float32 vs float64 interpolation)
AT_GMWMI = 0.011  # |GM - WM| at a cropped end (tckgen: < 0.01)
Z = 4.5


class Tracts:
    """A tractogram and its measures: lengths, header, both ends of every streamline, their
    tissue (nearest voxel's largest 5TT volume) and interpolated 5TT values, the TDI (lazily)."""

    def __init__(self, tck, ctx):
        self.tck, self.ctx = tck, ctx
        self.sl = fs.streamlines(tck)
        self.n = len(self.sl)
        self.header = fs.tck_header(tck)
        self.lengths = np.round(fs.lengths(self.sl), 2)
        ends = np.concatenate([s[[0, -1]] for s in self.sl]) if self.n else np.zeros((0, 3))
        aff, tt = ctx["affine"], ctx["tt"]
        self.cls = fs.tissue_class(tt, aff, ends)
        self.tis = fs.trilinear(tt, aff, ends) if self.n else np.zeros((0, 5))
        v = fs.world_to_voxel(aff, ends)
        self.edge = np.any((v < 0.5) | (v > np.array(tt.shape[:3]) - 1.5), axis=1)
        self._tdi = None

    @property
    def tdi(self):
        if self._tdi is None:
            self._tdi = fs.tckmap(self.tck, self.ctx["fod"], self.tck[:-4] + "_tdi.nii")
        return self._tdi

    def fraction(self, k):
        return float(np.mean(self.cls == k)) if self.n else 0.0

    def bad_ends(self):
        """Streamlines with an end neither in GM (interpolated) nor at the image edge."""
        t = self.tis
        ok = self.edge | (np.nan_to_num(t[:, 0] + t[:, 1] - t[:, 2], nan=-1) >= -EPS_GM)
        return int(np.sum(~ok.reshape(-1, 2).all(axis=1)))

    def count(self):
        return int(self.header.get("count", -1))

    def total(self):
        return int(self.header.get("total_count", -1))

    def cortical_gaps(self, signed=False):
        """|GM - WM| (interpolated; GM - WM if signed) at the ends on the cortical side (cGM >= sGM,
        not at the edge)."""
        t = self.tis
        sel = (t[:, 0] >= t[:, 1]) & ~self.edge & np.isfinite(t[:, 0])
        g = t[sel, 0] + t[sel, 1] - t[sel, 2]
        return g if signed else np.abs(g)

    def interface_ends(self):
        """Streamlines with an end at the grey-white interface: |GM - WM| <= AT_GMWMI interpolated."""
        t = self.tis
        at = np.abs(np.nan_to_num(t[:, 0] + t[:, 1] - t[:, 2], nan=1)) <= AT_GMWMI
        return int(np.sum(at.reshape(-1, 2).any(axis=1)))


def binom_z(f, n, refs):
    """z of a fraction f (n units) against the pooled fraction of refs [(f, n)]."""
    n0 = sum(m for _, m in refs)
    f0 = sum(g * m for g, m in refs) / n0
    sd = np.sqrt(max(f0 * (1 - f0), 1 / n0) * (1 / n + 1 / n0))  # (a floor: tckgen at 0 of n0)
    return (f - f0) / sd, f0, sd


def total_ok(x, refs):
    """total_count of x against tckgen's runs refs: N kept of T tried is a negative binomial,
    sd(T) = sqrt(N (1 - p)) / p; the difference of x's and the mean of k runs: sd sqrt(1 + 1/k)."""
    totals = np.array([r.total() for r in refs], float)
    n = x.count()
    p = sum(r.count() for r in refs) / totals.sum()
    ref = totals.mean() * n / np.mean([r.count() for r in refs])
    sd = np.sqrt(n * (1 - p)) / p * np.sqrt(1 + 1 / len(refs))
    ok = abs(x.total() - ref) <= 5 * sd + 2
    return ok, (f"total_count {x.total()} for {n} kept (acceptance {n / max(x.total(), 1):.3f}); tckgen "
                f"{[r.total() for r in refs]} ({p:.3f}); |diff| {abs(x.total() - ref):.0f} (at most 5 sd = "
                f"{5 * sd + 2:.0f})")


def tissue_criteria(x, refs):
    """endpoint-tissue, ends-in-gm and csf-ends of x against tckgen's runs refs."""
    out = {}
    z, txt = [], []
    for k, name in enumerate(CLASSES):
        zk, f0, _ = binom_z(x.fraction(k), x.n, [(r.fraction(k), r.n) for r in refs])
        z.append(zk)
        txt.append(f"{name} {100 * x.fraction(k):.1f}% vs {100 * f0:.1f}% (z {zk:+.1f})")
    out["endpoint-tissue"] = (max(np.abs(z)) <= Z, "endpoints by the nearest voxel's tissue: " + ", ".join(txt) +
                              f" (|z| at most {Z}; tckgen runs " +
                              " / ".join(", ".join(f"{100 * r.fraction(k):.1f}" for k in range(4)) for r in refs) + ")")
    bad_ref = [r.bad_ends() for r in refs]
    f0 = sum(bad_ref) / sum(r.n for r in refs)
    allowed = f0 * x.n + Z * np.sqrt(f0 * x.n * (1 + x.n / sum(r.n for r in refs)))
    out["ends-in-gm"] = (x.bad_ends() <= allowed,
                         f"{x.bad_ends()} of {x.n} streamlines with an end neither in GM (interpolated cGM + sGM >= "
                         f"WM - {EPS_GM}) nor at the image edge; tckgen {bad_ref} of {[r.n for r in refs]} "
                         f"(allowed {allowed:.1f})")
    zc, f0, sd = binom_z(x.fraction(3), x.n, [(r.fraction(3), r.n) for r in refs])
    out["csf-ends"] = (zc <= Z, f"{100 * x.fraction(3):.2f}% of endpoints in CSF voxels, tckgen {100 * f0:.2f}% "
                                f"(z {zc:+.1f}, at most {Z})")
    return out


def criteria(x, a, b):
    """All criteria of section 1 for x against tckgen's runs a and b: {name: (ok, detail)}."""
    out = {}
    r_self = fs.corr(a.tdi, b.tdi)
    ra, rb = fs.corr(x.tdi, a.tdi), fs.corr(x.tdi, b.tdi)
    r = (ra + rb) / 2
    out["tdi"] = ((1 - r) <= 3 * (1 - r_self),
                  f"r_dimoc {r:.4f} (vs a {ra:.4f}, vs b {rb:.4f}), r_self {r_self:.4f}: (1 - r_dimoc) / "
                  f"(1 - r_self) = {(1 - r) / (1 - r_self):.2f} (at most 3)")
    ref = np.concatenate([a.lengths, b.lengths])
    med, med_mr = np.median(x.lengths), np.median(ref)
    out["median-length"] = (abs(med / med_mr - 1) <= 0.15,
                            f"{med:.1f} mm, tckgen {med_mr:.1f} mm ({100 * (med / med_mr - 1):+.1f}%, at most 15%)")
    p = ks_2samp(x.lengths, ref).pvalue
    out["length-distribution"] = (p > 1e-3, f"KS against tckgen's {len(ref)} lengths: p = {p:.2g} (at least 1e-3); "
                                            f"quartiles {np.percentile(x.lengths, 25):.1f}/"
                                            f"{np.percentile(x.lengths, 75):.1f}, tckgen {np.percentile(ref, 25):.1f}/"
                                            f"{np.percentile(ref, 75):.1f} mm")
    out.update(tissue_criteria(x, [a, b]))
    out["acceptance"] = total_ok(x, [a, b])
    return out


def crop_criteria(x, ref):
    """Section 2's criteria of x against one tckgen -crop_at_gmwmi run."""
    out = {}
    gx, gr = x.cortical_gaps(), ref.cortical_gaps()
    fx, fr = np.mean(gx <= AT_GMWMI), np.mean(gr <= AT_GMWMI)
    z, f0, _ = binom_z(fx, len(gx) / 2, [(fr, len(gr) / 2)])
    out["at-interface"] = (abs(z) <= Z, f"{100 * fx:.1f}% of {len(gx)} cortical-side ends with |GM - WM| <= "
                                        f"{AT_GMWMI}, tckgen {100 * fr:.1f}% of {len(gr)} (z {z:+.1f}, |z| at "
                                        f"most {Z}); median |GM - WM| of those {np.median(gx[gx <= AT_GMWMI]) if fx else 0:.4f}, "
                                        f"tckgen {np.median(gr[gr <= AT_GMWMI]) if fr else 0:.4f}")
    p = ks_2samp(np.where(gx <= AT_GMWMI, 0, gx), np.where(gr <= AT_GMWMI, 0, gr)).pvalue
    out["gap-distribution"] = (p > 1e-3, f"KS of |GM - WM| at cortical-side ends (at the interface = 0): p = {p:.2g} "
                                         f"(at least 1e-3); 95th percentile {np.percentile(gx, 95):.3f}, tckgen "
                                         f"{np.percentile(gr, 95):.3f}")
    sx, sr = x.cortical_gaps(signed=True), ref.cortical_gaps(signed=True)
    wx, wr = np.mean(sx[np.abs(sx) <= AT_GMWMI] < -1e-4), np.mean(sr[np.abs(sr) <= AT_GMWMI] < -1e-4)
    z, f0, _ = binom_z(wx, max(np.sum(np.abs(sx) <= AT_GMWMI), 1) / 2, [(wr, max(np.sum(np.abs(sr) <= AT_GMWMI), 1) / 2)])
    out["grey-side"] = (z <= Z, f"{100 * wx:.1f}% of the ends at the interface on its white-matter side (GM - WM < "
                                f"-1e-4; tckgen keeps the cropped point where GM >= WM), tckgen {100 * wr:.1f}% (z "
                                f"{z:+.1f}, at most {Z}); GM - WM at those ends from {np.min(sx[np.abs(sx) <= AT_GMWMI]) if len(sx) else 0:.4f}, "
                                f"tckgen from {np.min(sr[np.abs(sr) <= AT_GMWMI]) if len(sr) else 0:.4f}")
    out["ends-in-gm"] = tissue_criteria(x, [ref])["ends-in-gm"]
    return out


class Ctx(dict):
    pass


def run_tckgen(ctx, name, alg, n, *opts, rng=RNG_A, seed=None):
    seed_kind, seed_img = seed or ("-seed_image", ctx["wm"])
    out = f"{ctx['d']}/{name}.tck"
    fs.tckgen(ctx["fod"], out, seed_img, "-act", ctx["5tt"], "-algorithm", MRTRIX_NAME[alg], "-select", n, *opts,
              rng=rng, seed_kind=seed_kind)
    return Tracts(out, ctx)


def run_dimoc(ctx, name, alg, n, *opts, seed=None, act=True):
    out = f"{ctx['d']}/{name}_dimoc"
    seed = seed or ("--seed", ctx["wm"])
    rc, _, err = dimoc("track", "--fod", ctx["fod"], *seed, "--out", out, "--algorithm", alg, "--select", n,
                       *(["--act", ctx["5tt"]] if act else []), "--rseed", 7, "--threads", 2, "--device", "cpu",
                       *opts, expect_ok=False)
    if rc:
        return None, (err.strip().splitlines() or [f"exit {rc}"])[-1]
    return Tracts(f"{out}/tracks.tck", ctx), out


def header_keys(name, x, ref):
    """tckgen's ACT header entries: act (the 5TT), backtrack (0 or 1), crop_at_gmwmi (1, only
    when given): dimoc's as tckgen's."""
    keys = ("act", "backtrack", "crop_at_gmwmi")
    norm = lambda h, k: os.path.basename(h[k]) if k == "act" and k in h else h.get(k)
    got, want = {k: norm(x.header, k) for k in keys}, {k: norm(ref.header, k) for k in keys}
    check(f"{name}-header-act-keys", got == want, f"dimoc {got}, tckgen {want}")


def report(prefix, crits):
    for c, (ok, detail) in crits.items():
        check(f"{prefix}-{c}", ok, "dimoc " + detail)


def gmwmi_truth(tt):
    """What 5tt2gmwmi computes: per voxel sqrt(sum over axes of (m min(|GM+ - GM-|, |WM+ - WM-|))^2),
    GM = cGM + sGM, +/- the neighbours along the axis (the voxel itself beyond the grid, and then
    m = 1, else 1/2)."""
    gm, wm = tt[..., 0] + tt[..., 1], tt[..., 2]
    out = np.zeros(gm.shape)
    for ax in range(3):
        n = gm.shape[ax]
        idx = np.arange(n)
        lo, hi = np.maximum(idx - 1, 0), np.minimum(idx + 1, n - 1)
        m = np.where((idx == 0) | (idx == n - 1), 1.0, 0.5)
        shape = [1, 1, 1]
        shape[ax] = n
        dg = np.abs(np.take(gm, hi, ax) - np.take(gm, lo, ax))
        dw = np.abs(np.take(wm, hi, ax) - np.take(wm, lo, ax))
        out += (m.reshape(shape) * np.minimum(dg, dw)) ** 2
    return np.sqrt(out)


def phantom_checks(ctx):
    rc, _, err = fs.run(["5ttcheck", ctx["5tt"]])
    check("5tt-phantom-5ttcheck", rc == 0 and "checked OK" in err and "WARN" not in err,
          f"rc {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}")
    rc, _, err = fs.run(["5tt2gmwmi", ctx["5tt"], ctx["gmwmi"], "-force", "-quiet"])
    if rc:
        check("5tt-phantom-gmwmi", False, err.strip())
        return False
    g = np.asarray(nib.load(ctx["gmwmi"]).dataobj, float)
    want = gmwmi_truth(np.asarray(nib.load(ctx["5tt"]).dataobj, float))
    tt = ctx["tt"]
    check("5tt-phantom-gmwmi", g.shape == want.shape and np.abs(g - want).max() < 1e-5 and (g > 0.05).sum() > 100,
          f"5tt2gmwmi against its definition (per axis the smaller of |d GM| and |d WM| over the two neighbours): max "
          f"diff {np.abs(g - want).max():.1e}; {int((g > 0.05).sum())} voxels above 0.05, cortical "
          f"{int(((g > 0.05) & (tt[..., 0] > 0.05)).sum())}, sub-cortical {int(((g > 0.05) & (tt[..., 1] > 0.05)).sum())}")
    return True


def act_vs_tckgen(ctx, alg, n, seed=None, name=None):
    """Section 1 (and 4 with a GMWMI seed): tckgen twice, dimoc once.  Returns (dimoc, a, b, dimoc's out)."""
    name = name or f"act-{alg}"
    t0 = time.time()
    a = run_tckgen(ctx, f"{name}_a", alg, n, rng=RNG_A, seed=seed and ("-seed_gmwmi", seed[1]))
    t_a = time.time() - t0
    b = run_tckgen(ctx, f"{name}_b", alg, n, rng=RNG_B, seed=seed and ("-seed_gmwmi", seed[1]))
    t0 = time.time()
    x, out = run_dimoc(ctx, name, alg, n, seed=seed)
    t_d = time.time() - t0
    print(f"     {name}: tckgen {t_a:.1f} s, dimoc {t_d:.1f} s for {n} streamlines; tckgen total_count "
          f"{a.total()} / {b.total()}, median length {np.median(a.lengths):.1f} / {np.median(b.lengths):.1f} mm")
    for r, tag in ((a, "a"), (b, "b")):
        check(f"{name}-tckgen-control-ends-in-gm", r.bad_ends() == 0,
              f"tckgen {tag}: {r.bad_ends()} of {r.n} streamlines with an end neither in GM nor at the edge")
    check(f"{name}-dimoc-runs", x is not None and x.count() == n == x.n,
          out if x is None else f"count {x.count()}, in file {x.n} (want {n})")
    if x is None:
        return None, a, b, None
    header_keys(name, x, a)
    crits = criteria(x, a, b)
    if seed:
        # tckgen's GMWMI seed lies on the interface's grey side (0 <= GM - WM < 0.01), so it is
        # tracked one way only, into the WM: the seed is an end of its streamline
        f = x.interface_ends() / x.n
        z, f0, _ = binom_z(f, x.n, [(r.interface_ends() / r.n, r.n) for r in (a, b)])
        crits["seed-end-at-interface"] = (abs(z) <= Z, f"{100 * f:.1f}% of streamlines with an end at the grey-white "
                                                       f"interface (|GM - WM| <= {AT_GMWMI}), tckgen {100 * f0:.1f}% "
                                                       f"(z {z:+.1f}, |z| at most {Z})")
    report(name, crits)
    return x, a, b, out


def crop(ctx, alg, uncropped):
    n = N["crop"]
    ref = run_tckgen(ctx, f"crop-{alg}", alg, n, "-crop_at_gmwmi", rng=RNG_A)
    # control: the criterion tells cropped from uncropped ends (tckgen without -crop_at_gmwmi fails it)
    if uncropped is not None:
        ok, det = crop_criteria(uncropped, ref)["at-interface"]
        check(f"crop-{alg}-control-uncropped-fails", not ok, f"tckgen without -crop_at_gmwmi: {det}")
    x, out = run_dimoc(ctx, f"crop-{alg}", alg, n, "--crop-at-gmwmi")
    check(f"crop-{alg}-dimoc-runs", x is not None and x.n == n, out if x is None else f"{x.n} streamlines")
    if x is not None:
        header_keys(f"crop-{alg}", x, ref)
        report(f"crop-{alg}", crop_criteria(x, ref))


def backtrack(ctx, alg, without):
    """without = (dimoc, [tckgen runs]) without --backtrack, from section 1."""
    n = N["backtrack"]
    ref = run_tckgen(ctx, f"backtrack-{alg}", alg, n, "-backtrack", rng=RNG_A)
    x, out = run_dimoc(ctx, f"backtrack-{alg}", alg, n, "--backtrack")
    dm0, refs0 = without
    rate = lambda t: t.count() / max(t.total(), 1)
    r0 = np.mean([rate(r) for r in refs0])
    check(f"backtrack-{alg}-tckgen-control-rate-higher", rate(ref) > r0 + 0.2,
          f"tckgen acceptance {rate(ref):.3f} with -backtrack, {r0:.3f} without")
    check(f"backtrack-{alg}-dimoc-runs", x is not None and x.n == n, out if x is None else f"{x.n} streamlines")
    if x is None:
        return
    header_keys(f"backtrack-{alg}", x, ref)
    ok, det = total_ok(x, [ref])
    check(f"backtrack-{alg}-acceptance", ok, "dimoc --backtrack " + det)
    if dm0 is not None:
        gain, gain_mr = rate(x) - rate(dm0), rate(ref) - r0
        check(f"backtrack-{alg}-rate-higher", gain > 0.2 and abs(gain - gain_mr) <= 0.1,
              f"dimoc acceptance {rate(dm0):.3f} -> {rate(x):.3f} with --backtrack (+{gain:.3f}); tckgen "
              f"{r0:.3f} -> {rate(ref):.3f} (+{gain_mr:.3f}); differences within 0.1")
    check(f"backtrack-{alg}-ends-in-gm", *tissue_criteria(x, [ref])["ends-in-gm"])
    med, med_mr = np.median(x.lengths), np.median(ref.lengths)
    check(f"backtrack-{alg}-median-length", abs(med / med_mr - 1) <= 0.15,
          f"dimoc {med:.1f} mm, tckgen {med_mr:.1f} mm ({100 * (med / med_mr - 1):+.1f}%, at most 15%)")


def header_float(h, key):
    try:
        return float(h.get(key, "nan"))
    except ValueError:
        return float("nan")


def defaults(ctx, x, x_out, refs):
    """Section 5; x, x_out: dimoc's iFOD2 --act run of section 1, refs: tckgen's."""
    ref = refs[0]
    want = {"threshold": 0.05, "init_threshold": 0.05, "min_dist": 2 * fs.VOXEL, "max_dist": 100 * fs.VOXEL}
    mr = {k: header_float(ref.header, k) for k in want}
    check("defaults-tckgen-control-header", all(abs(mr[k] - v) < 1e-6 for k, v in want.items()),
          f"tckgen -act header {mr}")
    dm = {k: header_float(x.header, k) for k in want}
    check("defaults-act-header", all(abs(dm[k] - v) < 1e-6 for k, v in want.items()),
          f"dimoc --act header {dm}, want {want} (tckgen's)")
    import json
    try:
        res = json.load(open(f"{x_out}/provenance.json"))["results"]
    except (OSError, ValueError, KeyError) as e:
        res = {"error": str(e)}
    ok = abs(float(res.get("cutoff", "nan")) - 0.05) < 1e-6 and abs(float(res.get("min_length_mm", "nan")) - 4) < 1e-6
    check("defaults-act-provenance", ok, f"provenance.json results: cutoff {res.get('cutoff')}, min_length_mm "
                                         f"{res.get('min_length_mm')} (want 0.05, 4)")
    # short streamlines (4..10 mm) exist under ACT, in tckgen's proportion
    fx = np.mean(x.lengths < 10)
    z, f0, _ = binom_z(fx, x.n, [(np.mean(r.lengths < 10), r.n) for r in refs])
    check("defaults-act-min-length", x.lengths.min() >= 4 - 1e-3 and abs(z) <= Z and f0 > 0.005,
          f"dimoc shortest {x.lengths.min():.2f} mm (at least 4), {100 * fx:.1f}% shorter than 10 mm, tckgen "
          f"{100 * f0:.1f}% (z {z:+.1f})")
    # --cutoff 0.1 given: stays 0.1
    n = N["small"]
    r01 = run_tckgen(ctx, "cutoff01", "ifod2", n, "-cutoff", 0.1)
    mr01 = {k: header_float(r01.header, k) for k in ("threshold", "init_threshold", "min_dist")}
    check("defaults-tckgen-control-cutoff-given", abs(mr01["threshold"] - 0.1) < 1e-6 and mr01["min_dist"] == 4,
          f"tckgen -act -cutoff 0.1: {mr01}")
    d01, out = run_dimoc(ctx, "cutoff01", "ifod2", n, "--cutoff", 0.1)
    if d01 is None:
        check("defaults-act-cutoff-given", False, f"dimoc failed: {out}")
    else:
        h = {k: header_float(d01.header, k) for k in ("threshold", "init_threshold", "min_dist")}
        check("defaults-act-cutoff-given", all(abs(h[k] - mr01[k]) < 1e-6 for k in h),
              f"dimoc --act --cutoff 0.1: {h}, tckgen {mr01}")
    # --max-length 30: too long streamlines are rejected, not cut
    # (a cut streamline is 30 mm to float precision; without ACT a third or more of iFOD2's are)
    rml = run_tckgen(ctx, "maxlen30", "ifod2", n, "-maxlength", 30)
    exact = lambda t: int(np.sum(np.abs(fs.lengths(t.sl) - 30) < 1e-4))
    top = lambda t: float(np.mean(t.lengths > 29))
    check("defaults-tckgen-control-max-length-rejects", rml.lengths.max() <= 30 + 1e-3 and exact(rml) == 0,
          f"tckgen longest {rml.lengths.max():.3f} mm, {exact(rml)} of exactly 30 mm, {100 * top(rml):.1f}% longer "
          f"than 29 mm")
    dml, out = run_dimoc(ctx, "maxlen30", "ifod2", n, "--max-length", 30)
    if dml is None:
        check("defaults-act-max-length-rejects", False, f"dimoc failed: {out}")
        return
    ok, det = total_ok(dml, [rml])
    z, f0, _ = binom_z(top(dml), dml.n, [(top(rml), rml.n)])
    check("defaults-act-max-length-rejects", dml.lengths.max() <= 30 + 1e-3 and exact(dml) == 0 and ok and abs(z) <= Z,
          f"dimoc longest {dml.lengths.max():.3f} mm, {exact(dml)} of exactly 30 mm (tckgen 0), {100 * top(dml):.1f}% "
          f"longer than 29 mm (tckgen {100 * f0:.1f}%, z {z:+.1f}); {det}")


def bad_inputs(ctx):
    d, tt, aff = ctx["d"], ctx["tt"], ctx["affine"]
    three_d = fs.save(f"{d}/tt_3d.nii.gz", tt[..., 2], aff)
    four = fs.save(f"{d}/tt_4vol.nii.gz", tt[..., :4], aff)
    fod, wm = ctx["fod"], ctx["wm"]
    cases = [
        ("act-3d", ["--seed", wm, "--act", three_d], ["-seed_image", wm, "-act", three_d], ["tt_3d.nii.gz"]),
        ("act-4-volumes", ["--seed", wm, "--act", four], ["-seed_image", wm, "-act", four], ["tt_4vol.nii.gz"]),
        ("seed-gmwmi-without-act", ["--seed-gmwmi", ctx["gmwmi"]], ["-seed_gmwmi", ctx["gmwmi"]],
         ["--seed-gmwmi", "--act"]),
        ("backtrack-sd_stream", ["--seed", wm, "--act", ctx["5tt"], "--backtrack", "--algorithm", "sd_stream"],
         ["-seed_image", wm, "-act", ctx["5tt"], "-backtrack", "-algorithm", "SD_Stream"], ["--backtrack"]),
    ]
    for name, args, mr_args, words in cases:
        rc_t, _, err_t = fs.run(["tckgen", fod, f"{d}/bad_{name}.tck", *mr_args, "-select", 10, "-quiet", "-force",
                                 "-nthreads", 1])
        check(f"bad-input-{name}-tckgen-control", rc_t != 0, f"tckgen rc {rc_t}: {err_t.strip()}")
        out = f"{d}/bad_{name}"
        rc, _, err = dimoc("track", "--fod", fod, *args, "--out", out, "--select", 10, expect_ok=False)
        lines = [l for l in err.strip().splitlines() if l.strip()]
        left = [f for f in os.listdir(d) if f.startswith(f"bad_{name}") and not f.endswith(".tck")]
        ok = rc != 0 and len(lines) == 1 and all(w in lines[0] for w in words) and not left
        check(f"bad-input-{name}", ok, f"rc {rc}, stderr {err.strip()!r} (want one line naming {words}); "
                                       f"left behind {left}")


def main():
    if not all(shutil.which(t) for t in ("tckgen", "tckmap", "5ttcheck", "5tt2gmwmi")):
        check("fodtrack-act-mrtrix-available", False, "MRtrix3 not found (scripts/install-deps.sh)")
        finish()
    t_start = time.time()
    d = workdir("fodtrack_act")
    p = fs.phantom(d, floor=FLOOR)
    tt_path, tt = fs.five_tissue(d, p)
    ctx = Ctx(d=d, fod=p["fod"], wm=p["wm"], affine=p["affine"], tt=tt, gmwmi=f"{d}/gmwmi.nii.gz")
    ctx["5tt"] = tt_path
    if not phantom_checks(ctx):
        finish()
    rc, out, _ = dimoc("help", "track", expect_ok=False)
    if rc != 0 or "--act" not in out:
        check("fodtrack-act-option-exists", False, "`dimoc help track` has no --act")
    x2, a2, b2, out2 = act_vs_tckgen(ctx, "ifod2", N["ifod2"])
    x1, a1, b1, _ = act_vs_tckgen(ctx, "ifod1", N["ifod1"])
    crop(ctx, "ifod2", a2)
    crop(ctx, "ifod1", None)
    backtrack(ctx, "ifod2", (x2, [a2, b2]))
    act_vs_tckgen(ctx, "ifod2", N["gmwmi"], seed=("--seed-gmwmi", ctx["gmwmi"]), name="seed-gmwmi-ifod2")
    if x2 is not None:
        defaults(ctx, x2, out2, [a2, b2])
    else:
        check("defaults", False, "no dimoc --act run to read")
    bad_inputs(ctx)
    print(f"     {time.time() - t_start:.0f} s in all")
    finish()


if __name__ == "__main__":
    main()
