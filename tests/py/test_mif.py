"""MRtrix images (.mif, .mif.gz) in and out of dimoc, with MRtrix 3.0.3's own commands as the
independent side.

(a) Reading: a DWI made by nibabel (oblique sform of positive determinant, so FSL's bvecs frame
    has its x flipped) is converted by mrconvert to .mif with several -strides, -datatype and
    -scaling; `dimoc dti` on each gives the maps that it gives on the NIfTI MRtrix exports from
    the same .mif (mrconvert -export_grad_fsl: MRtrix's own reading of the values, its own
    storage order and its own FSL gradients), and, for the float types, the maps of the original
    NIfTI in world space (nibabel's closest canonical orientation: the same voxels, whatever the
    order stored).  `dimoc angles` on a 3-volume map of each data type reads the exact values.
(b) Writing: dimoc's .mif and .mif.gz maps seen by mrinfo (the NIfTI map's dims, voxel sizes
    and transform), mrconvert (to NIfTI: nibabel reads the NIfTI map's values), mrcalc and
    mrstats (zero difference).
(c) Gradient tables: dti, csd and fit on a .mif with its dw_scheme give the results of the
    NIfTI with FSL's bvals/bvecs; --grad with `mrinfo -export_grad_mrtrix`'s table likewise; a
    fit's predicted signal written as .mif carries a dw_scheme that `mrinfo -dwgrad` reads back
    as the input's.
(d) Bad input: broken headers, truncated data, an unknown data type and a dw_scheme of the
    wrong length are refused in one line naming the file, with no output folder.

Tolerances: maps of the same values agree to float32 rounding (1e-5 relative); tables that went
through MRtrix's text (10 significant digits) move FA by at most 1e-5."""
import os
import subprocess

import nibabel as nib
import numpy as np

from dmtest import check, check_refused, dimoc, finish, load, workdir

d = workdir("mif")
rng = np.random.default_rng(5)


def mr(*args):
    """Runs an MRtrix command quietly; its stdout."""
    p = subprocess.run([str(a) for a in args] + ["-quiet"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: {p.stderr.strip()}")
    return p.stdout


def canonical(path):
    img = nib.as_closest_canonical(nib.load(path))
    return np.asarray(img.dataobj, dtype=np.float64), img.affine


def rel_diff(a, b):
    return float(np.nanmax(np.abs(a - b)) / max(np.nanmax(np.abs(b)), 1e-30))


# --- the data: tensors on an 8x7x6 grid, 4 b=0 and 60 directions at b=1000 ---
shape = (8, 7, 6)
ndir = 60
g = rng.normal(size=(ndir, 3))
g /= np.linalg.norm(g, axis=1)[:, None]
bvals = np.r_[np.zeros(4), np.full(ndir, 1000.0)]
bvecs = np.r_[np.zeros((4, 3)), g]
sig = np.zeros(shape + (len(bvals),))
for idx in np.ndindex(shape):
    R, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    D = R @ np.diag([1.7e-3, 0.3e-3 + 0.2e-3 * rng.random(), 0.3e-3]) @ R.T
    sig[idx] = 800 * np.exp(-bvals * np.einsum("ni,ij,nj->n", bvecs, D, bvecs))
sig += rng.normal(scale=4, size=sig.shape)
th = 0.12
aff = np.array([[2 * np.cos(th), -2 * np.sin(th), 0.1, -10], [2 * np.sin(th), 2 * np.cos(th), 0, -20],
                [0, 0.05, 2.5, 5], [0, 0, 0, 1]])
assert np.linalg.det(aff[:3, :3]) > 0
dwi = os.path.join(d, "dwi.nii.gz")
nib.save(nib.Nifti1Image(sig.astype(np.float32), aff), dwi)
fbvals, fbvecs = os.path.join(d, "bvals"), os.path.join(d, "bvecs")
np.savetxt(fbvals, bvals[None], fmt="%g")
np.savetxt(fbvecs, bvecs.T, fmt="%.8f")
mask = os.path.join(d, "mask.nii.gz")
nib.save(nib.Nifti1Image(np.ones(shape, np.uint8), aff), mask)

dimoc("dti", "--data", dwi, "--bvals", fbvals, "--bvecs", fbvecs, "--out", f"{d}/ref")
MAPS = ["FA", "MD", "L1", "S0", "V1"]

# --- (a) reading every layout and data type ---
cases = [("f32_ras", "+1,+2,+3,+4", "float32", None, ".mif"),
         ("f64_las", "-1,+2,+3,+4", "float64", None, ".mif"),
         ("i16_volfirst", "+2,+3,+4,+1", "int16", "3,0.25", ".mif"),
         ("u8_flipped", "-1,-2,+3,+4", "uint8", "-10,4", ".mif"),
         ("u16be_perm", "+2,+1,+3,+4", "uint16be", None, ".mif"),
         ("f32_gz", "-1,+2,+3,+4", "float32", None, ".mif.gz")]
for name, strides, dtype, scaling, ending in cases:
    mif = os.path.join(d, name + ending)
    args = ["mrconvert", dwi, "-fslgrad", fbvecs, fbvals, "-strides", strides, "-datatype", dtype]
    if scaling:  # stored as round((value - offset) / multiplier), read as offset + multiplier x
        args += ["-scaling", scaling]
    mr(*args, mif, "-force")
    # MRtrix's reading of the same file: its NIfTI export and FSL gradients
    exp, ebvecs, ebvals = (os.path.join(d, name + s) for s in ("_mr.nii", "_mr.bvecs", "_mr.bvals"))
    mr("mrconvert", mif, exp, "-export_grad_fsl", ebvecs, ebvals, "-datatype", "float64", "-force")
    dimoc("dti", "--data", mif, "--out", f"{d}/o_{name}")
    dimoc("dti", "--data", exp, "--bvals", ebvals, "--bvecs", ebvecs, "--out", f"{d}/e_{name}")
    worst, aff_err = 0.0, 0.0
    for m in MAPS:
        a = nib.load(f"{d}/o_{name}/{m}.nii.gz")
        b = nib.load(f"{d}/e_{name}/{m}.nii.gz")
        x, y = np.asarray(a.dataobj, float), np.asarray(b.dataobj, float)
        if m == "V1":  # an axis: its sign is arbitrary
            x = x * np.sign(np.sum(x * y, axis=3, keepdims=True) + 1e-30)
        worst = max(worst, rel_diff(x, y))
        aff_err = max(aff_err, float(np.abs(a.affine - b.affine).max()))
    check(f"read-{name}-as-mrconvert", worst < 1e-4 and aff_err < 1e-4,
          f"{strides} {dtype} {scaling or ''}{ending}: maps differ by {worst:.2g} (relative), "
          f"affines by {aff_err:.2g} mm")
    if dtype.startswith("float"):
        worst = 0.0
        for m in ["FA", "MD", "L1", "S0"]:
            x, ax = canonical(f"{d}/o_{name}/{m}.nii.gz")
            y, ay = canonical(f"{d}/ref/{m}.nii.gz")
            worst = max(worst, rel_diff(x, y))
            aff_err = float(np.abs(ax - ay).max())
        check(f"read-{name}-as-nifti", worst < 1e-4 and aff_err < 1e-4,
              f"scalar maps differ from the NIfTI's by {worst:.2g}, affines by {aff_err:.2g} mm")

# exact values of every data type: dimoc angles on a direction map, against MRtrix's export
vec = rng.integers(1, 120, size=(5, 4, 3, 3)).astype(np.float32)
vnii = os.path.join(d, "vec.nii")
nib.save(nib.Nifti1Image(vec, aff), vnii)
for dtype in ["int8", "uint16le", "int32be", "uint32", "int64", "uint64be", "float64be", "bit"]:
    src = vnii
    if dtype == "bit":  # 0/1 values
        src = os.path.join(d, "vec_bit.nii")
        mr("mrcalc", vnii, 60, "-gt", src, "-force")
    mif = os.path.join(d, f"vec_{dtype}.mif")
    mr("mrconvert", src, mif, "-datatype", dtype, "-strides", "+2,-3,+4,+1", "-force")
    exp = os.path.join(d, f"vec_{dtype}_mr.nii")
    mr("mrconvert", mif, exp, "-datatype", "float64", "-force")
    dimoc("angles", mif, "--out", f"{d}/a_{dtype}")
    dimoc("angles", exp, "--out", f"{d}/b_{dtype}")
    same = all(np.array_equal(load(f"{d}/a_{dtype}/{m}.nii.gz"), load(f"{d}/b_{dtype}/{m}.nii.gz"),
                              equal_nan=True) for m in ["th", "ph"])
    check(f"read-values-{dtype}", same, "th/ph from the .mif and from MRtrix's NIfTI export")

# --- (b) dimoc's .mif output read by MRtrix ---
dimoc("dti", "--data", dwi, "--bvals", fbvals, "--bvecs", fbvecs, "--format", "mif",
      "--out", f"{d}/wm")
dimoc("dti", "--data", dwi, "--bvals", fbvals, "--bvecs", fbvecs, "--format", "mif.gz",
      "--out", f"{d}/wz")
names = sorted(os.listdir(f"{d}/wm"))
check("write-mif-names", names == sorted([m + ".mif" for m in
                                          ["FA", "MD", "MO", "L1", "L2", "L3", "S0", "V1", "V2",
                                           "V3"]] + ["provenance.json"]), " ".join(names))
for m in ["FA", "V1"]:
    nii, mif, mgz = f"{d}/ref/{m}.nii.gz", f"{d}/wm/{m}.mif", f"{d}/wz/{m}.mif.gz"
    info = {p: [mr("mrinfo", p, opt).split() for opt in ("-size", "-spacing", "-transform")]
            for p in (nii, mif, mgz)}
    same_dims = info[nii][0] == info[mif][0] == info[mgz][0]
    vox = [np.array(info[p][1], float) for p in (nii, mif, mgz)]
    tr = [np.array(info[p][2], float) for p in (nii, mif, mgz)]
    check(f"write-{m}-mrinfo", same_dims and np.allclose(vox[0], vox[1], atol=1e-5) and
          np.allclose(vox[0], vox[2], atol=1e-5) and np.allclose(tr[0], tr[1], atol=1e-5) and
          np.allclose(tr[0], tr[2], atol=1e-5),
          f"dims {info[mif][0]}, voxel sizes {vox[1]}, transform max diff "
          f"{np.abs(tr[0] - tr[1]).max():.2g}")
    back = os.path.join(d, f"{m}_back.nii")
    mr("mrconvert", mgz, back, "-force")
    a, b = nib.load(back), nib.load(nii)
    check(f"write-{m}-mrconvert", np.array_equal(np.asarray(a.dataobj), np.asarray(b.dataobj)) and
          np.allclose(a.affine, b.affine, atol=1e-4), "values through mrconvert equal nibabel's")
    diff = os.path.join(d, f"{m}_diff.mif")
    mr("mrcalc", mif, nii, "-subtract", "-abs", diff, "-force")
    mx = float(mr("mrstats", diff, "-output", "max").split()[0])
    mean_mif = [float(x) for x in mr("mrstats", mif, "-output", "mean").split()]
    mean_nii = [float(x) for x in mr("mrstats", nii, "-output", "mean").split()]
    check(f"write-{m}-mrcalc-mrstats", mx == 0 and np.allclose(mean_mif, mean_nii, rtol=1e-6),
          f"max |mif - nii| {mx}, means {mean_mif[:3]}")
rc, out, _ = dimoc("fit", "dti", "--data", dwi, "--bvals", fbvals, "--bvecs", fbvecs, "--format",
                   "mif", "--out", f"{d}/fm", "--quiet")
check("write-status-uint8", mr("mrinfo", f"{d}/fm/status.mif", "-datatype").strip() == "UInt8",
      mr("mrinfo", f"{d}/fm/status.mif", "-datatype").strip())

# --- (c) gradient tables ---
dmif = os.path.join(d, "dwi_grad.mif")
mr("mrconvert", dwi, "-fslgrad", fbvecs, fbvals, dmif, "-force")
btable = os.path.join(d, "grad.b")
mr("mrinfo", dmif, "-export_grad_mrtrix", btable, "-force")
# MRtrix's FSL export of the .mif's own table equals the bvecs dimoc derives from it: the same
# tensor maps as with FSL's originals, from three sources
dimoc("dti", "--data", dmif, "--out", f"{d}/g_scheme")
dimoc("dti", "--data", dwi, "--grad", btable, "--out", f"{d}/g_grad")
for src in ["g_scheme", "g_grad"]:
    worst = 0.0
    for m in MAPS:
        x, y = load(f"{d}/{src}/{m}.nii.gz"), load(f"{d}/ref/{m}.nii.gz")
        if m == "V1":
            x = x * np.sign(np.sum(x * y, axis=3, keepdims=True) + 1e-30)
        worst = max(worst, rel_diff(x, y))
    check(f"grad-dti-{src}", worst < 1e-4, f"maps differ from --bvals/--bvecs by {worst:.2g}")
fsl_v, fsl_b = os.path.join(d, "exp.bvecs"), os.path.join(d, "exp.bvals")
mr("mrconvert", dmif, os.path.join(d, "exp.nii"), "-export_grad_fsl", fsl_v, fsl_b, "-force")
ev = np.loadtxt(fsl_v)
check("grad-fsl-frame-as-mrtrix", np.allclose(ev, bvecs.T, atol=1e-6),
      f"MRtrix's export of the table vs the original bvecs: {np.abs(ev - bvecs.T).max():.2g}")

dimoc("csd", "--data", dwi, "--bvals", fbvals, "--bvecs", fbvecs, "--out", f"{d}/c_nii")
dimoc("csd", "--data", dmif, "--out", f"{d}/c_mif")
dimoc("csd", "--data", dwi, "--grad", btable, "--out", f"{d}/c_grad")
ref = load(f"{d}/c_nii/wm_fod.nii.gz")
for src in ["c_mif", "c_grad"]:
    x = load(f"{d}/{src}/wm_fod.nii.gz")
    check(f"grad-csd-{src}", rel_diff(x, ref) < 1e-4,
          f"FODs differ from --bvals/--bvecs by {rel_diff(x, ref):.2g}")

dimoc("fit", "dti", "--data", dwi, "--bvals", fbvals, "--bvecs", fbvecs, "--out", f"{d}/f_nii",
      "--quiet")
dimoc("fit", "dti", "--data", dmif, "--out", f"{d}/f_mif", "--quiet", "--predicted",
      "--format", "mif")
mr("mrconvert", f"{d}/f_mif/FA.mif", f"{d}/f_mif_FA.nii", "-force")
x, y = load(f"{d}/f_nii/FA.nii.gz"), load(f"{d}/f_mif_FA.nii")
check("grad-fit-mif", rel_diff(y, x) < 1e-4, f"FA differs from --bvals/--bvecs by "
      f"{rel_diff(y, x):.2g}")
t_in = np.array(mr("mrinfo", dmif, "-dwgrad").split(), float)
t_out = np.array(mr("mrinfo", f"{d}/f_mif/predicted.mif", "-dwgrad").split(), float)
check("grad-predicted-dw_scheme", t_in.shape == t_out.shape and np.allclose(t_in, t_out, atol=1e-6),
      f"{t_out.size // 4} rows read back by mrinfo -dwgrad")

# --- (d) bad input ---
good = open(dmif, "rb").read()
hdr_end = good.index(b"\nEND\n") + 5
text = good[:hdr_end].decode()


def variant(name, new_text, data=None):
    path = os.path.join(d, name + ".mif")
    with open(path, "wb") as f:
        f.write(new_text.encode() + (good[len(text):] if data is None else data))
    return path


dim_line = [ln for ln in text.split("\n") if ln.startswith("dim:")][0]
layout_line = [ln for ln in text.split("\n") if ln.startswith("layout:")][0]
type_line = [ln for ln in text.split("\n") if ln.startswith("datatype:")][0]
bad = {
    "no_dim": (variant("no_dim", text.replace(dim_line + "\n", "")), "no dim"),
    "bad_layout": (variant("bad_layout", text.replace(layout_line, "layout: +0,+1,x,+3")),
                   "layout"),
    "layout_count": (variant("layout_count", text.replace(layout_line, "layout: +0,+1,+2")),
                     "layout has 3 entries but dim has 4"),
    "unknown_type": (variant("unknown_type", text.replace(type_line, "datatype: Float16LE")),
                     "datatype 'Float16LE' is unknown"),
    "complex": (variant("complex", text.replace(type_line, "datatype: CFloat32LE")),
                "complex data"),
    "truncated": (variant("truncated", text, good[len(text):-1000]), "truncated"),
    "not_mif": (variant("not_mif", "mrtrix imag\n" + text[13:]), "not an MRtrix image"),
}
lines = text.split("\n")
dw_rows = [i for i, ln in enumerate(lines) if ln.startswith("dw_scheme:")]
# the last row made a comment of the same length, so that the data stay where "file:" says
short = "\n".join(ln if i != dw_rows[-1] else "comments: " + "x" * (len(ln) - 10)
                  for i, ln in enumerate(lines))
bad["dw_scheme_rows"] = (variant("dw_scheme_rows", short),
                         f"dw_scheme has {len(bvals) - 1} rows but the image has {len(bvals)} "
                         "volumes")
for name, (path, words) in bad.items():
    out = f"{d}/bad_{name}"
    r = dimoc("dti", "--data", path, "--out", out, expect_ok=False)
    check_refused(f"bad-{name}", r, words, out)
    check(f"bad-{name}-names-file", path in r[2], r[2].strip())
r = dimoc("dti", "--data", dwi, "--out", f"{d}/bad_no_table", expect_ok=False)
check_refused("bad-no-table", r, f"{dwi}: no gradient table", f"{d}/bad_no_table")
r = dimoc("csd", "--data", bad["dw_scheme_rows"][0], "--out", f"{d}/bad_csd_rows", expect_ok=False)
check_refused("bad-csd-dw_scheme_rows", r, "dw_scheme has", f"{d}/bad_csd_rows")
r = dimoc("fit", "dti", "--data", bad["dw_scheme_rows"][0], "--out", f"{d}/bad_fit_rows",
          expect_ok=False)
check_refused("bad-fit-dw_scheme_rows", r, "dw_scheme has", f"{d}/bad_fit_rows")
r = dimoc("fit", "dti", "--data", dmif, "--part", "1/2", "--format", "mif", "--out",
          f"{d}/bad_part", expect_ok=False)
check_refused("bad-part-mif", r, "--part: a part's maps are .nii.gz", f"{d}/bad_part")

# --- pipelines: --format mif and a .mif's own table ---
rc, _, err = dimoc("pipeline", "noddi_dti", "--data", dmif, "--mask", mask, "--out", f"{d}/pl",
                   "--format", "mif", expect_ok=False)
files = sorted(os.listdir(f"{d}/pl")) if rc == 0 else []
stage_files = sorted(os.listdir(f"{d}/pl/dimoc/dti")) if rc == 0 else []
check("pipeline-mif", rc == 0 and "NDI.mif" in files and "FA.mif" in stage_files and
      not any(f.endswith(".nii.gz") for f in files + stage_files),
      " ".join(files) if rc == 0 else f"rc {rc}: " + " ".join(err.split())[-300:])
finish()
