"""dimoc's NIfTI reader and writer against an independent implementation (nibabel), and its
gradient schemes against DIPY's gradient_table.

A small C driver is compiled here from the runtime's own I/O sources (runtime/io/volume.c and
friends), so this test does not depend on the rest of the program being built:
  write_like REF OUT NT UINT8   read REF, write a known pattern with REF's geometry
  dump IN OUT.f64               read IN (any type, scaled) and dump dims + doubles
  scheme SPEC BVALS BVECS       dm_scheme_make + dm_write_bvals_bvecs
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import nibabel as nib

ROOT = os.environ.get("ROOT", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
TMP = os.path.join(os.environ.get("TMPROOT", tempfile.gettempdir()), "test_nifti_readback")
os.makedirs(TMP, exist_ok=True)

failures = 0


def check(ok, name, why=""):
    global failures
    if ok:
        print(f"PASS {name}")
    else:
        failures += 1
        print(f"FAIL {name}: {why}")


DRIVER_C = r"""
#include "util/error.h"
#include "simulate/scheme.h"
#include "io/textio.h"
#include "io/volume.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pattern written by write_like: distinct values exact in float32, one NaN. */
static double pattern(size_t i) { return i == 3 ? NAN : (double)(i % 1000) * 0.25 - 7; }

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "write_like") == 0) {
        dm_volume ref;
        if (dm_volume_read(argv[2], &ref) != 0) goto fail;
        int nt = atoi(argv[4]), as_uint8 = atoi(argv[5]);
        size_t n = DM_NVOX(&ref) * nt;
        double *d = malloc(n * sizeof *d);
        for (size_t i = 0; i < n; i++) d[i] = as_uint8 ? (double)(i % 3) : pattern(i);
        if (dm_volume_write(argv[3], &ref, nt, d, as_uint8) != 0) goto fail;
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "dump") == 0) {
        dm_volume v;
        if (dm_volume_read(argv[2], &v) != 0) goto fail;
        FILE *f = fopen(argv[3], "wb");
        double dims[4] = {v.nx, v.ny, v.nz, v.nt};
        fwrite(dims, sizeof dims, 1, f);
        fwrite(v.data, sizeof(double), DM_NVOX(&v) * v.nt, f);
        fclose(f);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "scheme") == 0) {
        int n;
        double *b, *g;
        if (dm_scheme_make(argv[2], &n, &b, &g) != 0) goto fail;
        if (dm_write_bvals_bvecs(argv[3], argv[4], n, b, g) != 0) goto fail;
        return 0;
    }
    fprintf(stderr, "usage error\n");
    return 2;
fail:
    fprintf(stderr, "dimoc: error: %s\n", dm_last_error());
    return 1;
}
"""


def build_driver():
    src = os.path.join(TMP, "nifti_driver.c")
    exe = os.path.join(TMP, "nifti_driver")
    with open(src, "w") as f:
        f.write(DRIVER_C)
    runtime = os.path.join(ROOT, "runtime")
    sources = [os.path.join(runtime, s) for s in
               ("io/volume.c", "io/mif.c", "io/formats.c", "io/gz_blocks.c", "io/bigalloc.c", "util/error.c", "util/fsutil.c", "util/interrupt.c", "util/key_sort.c",
                "util/outdir.c",
                "simulate/scheme.c", "io/textio.c")]
    cmd = [os.environ.get("CC", "cc"), "-O1", "-g", "-Wall", "-Wextra", "-fopenmp", "-I" + runtime,
           "-I/usr/include/nifti", "-o", exe, src] + sources + [
           "-Wl,-Bstatic", "-lnifti2", "-lznz", "-ldeflate", "-Wl,-Bdynamic", "-lisal", "-lz", "-lm", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return exe if r.returncode == 0 else (None, r.stderr)


def run(exe, *args):
    r = subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True)
    return r.returncode, r.stderr.strip()


def oblique_affine(zooms):
    c, s = np.cos(0.3), np.sin(0.3)
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) @ np.array(
        [[1, 0, 0], [0, np.cos(0.2), -np.sin(0.2)], [0, np.sin(0.2), np.cos(0.2)]])
    aff = np.eye(4)
    aff[:3, :3] = rot * np.asarray(zooms[:3])
    aff[:3, 3] = [-40.5, 22.25, -13.0]
    return aff


def make_reference(path, shape, zooms, cls=nib.Nifti1Image, dtype=np.float32):
    data = np.arange(np.prod(shape), dtype=np.float64).reshape(shape, order="F")
    aff = oblique_affine(zooms)
    img = cls(data.astype(dtype), aff)
    img.header.set_zooms(zooms)
    img.set_qform(aff, code=1)
    img.set_sform(aff, code=4)
    img.header.set_xyzt_units("mm", "sec")
    nib.save(img, path)
    return nib.load(path)


def geometry_equal(out, ref):
    """Affines, codes, spatial zooms and units of out equal those of ref (float32 header)."""
    qa, qc = out.get_qform(coded=True)
    qra, qrc = ref.get_qform(coded=True)
    sa, sc = out.get_sform(coded=True)
    sra, src = ref.get_sform(coded=True)
    problems = []
    if qc != qrc or sc != src:
        problems.append(f"codes q{qc}/s{sc} vs q{qrc}/s{src}")
    if not np.allclose(qa, qra, atol=1e-5):
        problems.append(f"qform {qa.tolist()} vs {qra.tolist()}")
    if not np.allclose(sa, sra, atol=1e-5):
        problems.append(f"sform {sa.tolist()} vs {sra.tolist()}")
    if not np.allclose(out.header.get_zooms()[:3], ref.header.get_zooms()[:3]):
        problems.append(f"zooms {out.header.get_zooms()} vs {ref.header.get_zooms()}")
    if out.header.get_xyzt_units() != ref.header.get_xyzt_units():
        problems.append(f"units {out.header.get_xyzt_units()}")
    if int(out.header["intent_code"]) != 0:
        problems.append("intent code set")
    return "; ".join(problems)


def test_writer(exe):
    for ending in (".nii", ".nii.gz"):
        ref_path = os.path.join(TMP, "ref4d" + ending)
        ref = make_reference(ref_path, (6, 5, 4, 3), (1.5, 2.0, 2.5, 3.0))
        for nt in (1, 7):
            out = os.path.join(TMP, f"out{nt}{ending}")
            rc, err = run(exe, "write_like", ref_path, out, nt, 0)
            if rc != 0:
                check(False, f"write_float_nt{nt}{ending}", err)
                continue
            img = nib.load(out)
            shape = (6, 5, 4) + ((nt,) if nt > 1 else ())
            data = np.asarray(img.dataobj)
            n = int(np.prod(shape))
            want = (np.arange(n) % 1000) * 0.25 - 7
            want[3] = np.nan
            got = data.reshape(-1, order="F")
            check(img.shape == shape and data.dtype == np.float32 and
                  np.array_equal(got, want, equal_nan=True),
                  f"write_float_values_nt{nt}{ending}",
                  f"shape {img.shape} dtype {data.dtype}")
            why = geometry_equal(img, ref)
            check(not why, f"write_float_geometry_nt{nt}{ending}", why)
            raw = raw_header(out)
            check(raw["sizeof_hdr"] == 348 and float(raw["scl_slope"]) == 0 and
                  raw["magic"] == b"n+1" and int(raw["vox_offset"]) == 352,
                  f"write_header_fields_nt{nt}{ending}",
                  f"sizeof_hdr {raw['sizeof_hdr']} scl_slope {raw['scl_slope']} "
                  f"magic {raw['magic']} vox_offset {raw['vox_offset']}")
        out = os.path.join(TMP, "mask" + ending)
        rc, err = run(exe, "write_like", ref_path, out, 1, 1)
        img = nib.load(out) if rc == 0 else None
        check(img is not None and img.get_data_dtype() == np.uint8 and
              np.array_equal(np.asarray(img.dataobj).reshape(-1, order="F"),
                             np.arange(120) % 3) and not geometry_equal(img, ref),
              f"write_uint8{ending}", err)
    leftovers = [f for f in os.listdir(TMP) if ".tmp." in f]
    check(not leftovers, "write_no_temporaries", str(leftovers))


def raw_header(path, cls=nib.Nifti1Header):
    """The header as stored in the file (nibabel's loaded image resets scl_slope & co)."""
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return cls.from_fileobj(f)


def read_with_dimoc(exe, path):
    dump = path + ".f64"
    rc, err = run(exe, "dump", path, dump)
    if rc != 0:
        return None, err
    raw = np.fromfile(dump, dtype=np.float64)
    dims = tuple(int(x) for x in raw[:4])
    data = raw[4:].reshape(dims, order="F")
    return data, ""


def test_reader(exe):
    shape = (5, 4, 3, 2)
    rng = np.random.default_rng(3)
    values = rng.normal(100, 30, shape)
    cases = []
    # NIfTI-2, float64.
    p = os.path.join(TMP, "in_nifti2.nii")
    nib.save(nib.Nifti2Image(values, oblique_affine((2, 2, 2))), p)
    cases.append(("read_nifti2_float64", p))
    # int16 with scl_slope/scl_inter chosen by nibabel.
    p = os.path.join(TMP, "in_int16_scaled.nii.gz")
    img = nib.Nifti1Image(values, np.eye(4))
    img.set_data_dtype(np.int16)
    nib.save(img, p)
    cases.append(("read_int16_scaled", p))
    # NIfTI-2 + int16 + explicit slope and intercept.
    p = os.path.join(TMP, "in_nifti2_int16.nii.gz")
    raw = (np.arange(np.prod(shape)) - 50).astype(np.int16).reshape(shape)
    img = nib.Nifti2Image(raw, np.eye(4))
    img.header.set_slope_inter(0.5, -3.0)
    img.set_data_dtype(np.int16)
    nib.save(img, p)
    cases.append(("read_nifti2_int16_slope_inter", p))
    # Big-endian float32, uint8 and int32, and a .hdr/.img pair.
    p = os.path.join(TMP, "in_big_endian.nii")
    hdr = nib.Nifti1Header(endianness=">")
    nib.save(nib.Nifti1Image(values.astype(np.float32), np.eye(4), hdr), p)
    cases.append(("read_big_endian", p))
    # Big-endian float32 (.nii) and float64 (.nii.gz) holding NaN, +Inf and -Inf: the values
    # come back as they are (niftilib's own data reader would make them 0).
    non_finite = values.copy()
    non_finite[0, 0, 0, 0] = np.nan
    non_finite[1, 0, 0, 0] = np.inf
    non_finite[2, 3, 1, 1] = -np.inf
    for name, dtype, ending in (("float32", np.float32, ".nii"),
                                ("float64", np.float64, ".nii.gz")):
        p = os.path.join(TMP, f"in_big_endian_non_finite_{name}{ending}")
        hdr = nib.Nifti1Header(endianness=">")
        nib.save(nib.Nifti1Image(non_finite.astype(dtype), np.eye(4), hdr), p)
        cases.append((f"read_big_endian_non_finite_{name}{ending}", p))
    p = os.path.join(TMP, "in_uint8.nii.gz")
    nib.save(nib.Nifti1Image((np.arange(120) % 256).astype(np.uint8).reshape(shape),
                             np.eye(4)), p)
    cases.append(("read_uint8", p))
    p = os.path.join(TMP, "in_int32.nii")
    nib.save(nib.Nifti1Image((np.arange(120) * 1000 - 7).astype(np.int32).reshape(shape),
                             np.eye(4)), p)
    cases.append(("read_int32", p))
    p = os.path.join(TMP, "in_pair.img")
    nib.save(nib.Nifti1Pair(values.astype(np.float32), np.eye(4)), p)
    cases.append(("read_hdr_img_pair", os.path.join(TMP, "in_pair.hdr")))

    for name, path in cases:
        got, err = read_with_dimoc(exe, path)
        if got is None:
            check(False, name, err)
            continue
        want = nib.load(path).get_fdata(dtype=np.float64)
        if want.ndim == 3:
            want = want[..., None]
        # equal_nan: NaN must come back as NaN; Inf only matches Inf of the same sign.
        check(got.shape == want.shape and
              np.allclose(got, want, rtol=1e-12, atol=0, equal_nan=True),
              name, f"shape {got.shape} vs {want.shape}, max diff "
              f"{np.max(np.abs(got - want)) if got.shape == want.shape else 'n/a'}")

    for name, ending in (("float32", ".nii"), ("float64", ".nii.gz")):
        p = os.path.join(TMP, f"in_big_endian_non_finite_{name}{ending}")
        hdr = raw_header(p)
        got, err = read_with_dimoc(exe, p)
        ok = (hdr.endianness == ">" and got is not None and np.isnan(got[0, 0, 0, 0]) and
              got[1, 0, 0, 0] == np.inf and got[2, 3, 1, 1] == -np.inf and
              np.isfinite(got).sum() == got.size - 3)
        check(ok, f"reference_big_endian_non_finite_{name}{ending}",
              f"endianness {hdr.endianness} {err}" if got is None else
              f"endianness {hdr.endianness}, read {got[0, 0, 0, 0]} {got[1, 0, 0, 0]} "
              f"{got[2, 3, 1, 1]}, {got.size - np.isfinite(got).sum()} non-finite")

    hdr = raw_header(os.path.join(TMP, "in_nifti2_int16.nii.gz"), nib.Nifti2Header)
    check(hdr["sizeof_hdr"] == 540 and hdr.get_data_dtype() == np.int16 and
          float(hdr["scl_slope"]) == 0.5 and float(hdr["scl_inter"]) == -3,
          "reference_is_nifti2_int16_scaled",
          f"sizeof_hdr {hdr['sizeof_hdr']} slope {hdr['scl_slope']}")
    hdr = raw_header(os.path.join(TMP, "in_int16_scaled.nii.gz"))
    check(hdr.get_data_dtype() == np.int16 and float(hdr["scl_slope"]) not in (0.0, 1.0),
          "reference_int16_has_slope", f"slope {hdr['scl_slope']}")

    # A truncated .nii.gz: a clean one-line error naming the file, no crash.
    src = os.path.join(TMP, "in_big.nii.gz")
    nib.save(nib.Nifti1Image(rng.normal(size=(40, 40, 40)).astype(np.float32), np.eye(4)), src)
    blob = open(src, "rb").read()
    cut = os.path.join(TMP, "in_cut.nii.gz")
    with open(cut, "wb") as f:
        f.write(blob[:len(blob) // 2])
    got, err = read_with_dimoc(exe, cut)
    check(got is None and "in_cut.nii.gz" in err and "truncated" in err and
          err.count("\n") == 0, "read_truncated_gz_clean_error", repr(err))


def test_scheme_with_dipy(exe):
    try:
        from dipy.core.gradients import gradient_table
        from dipy.io import read_bvals_bvecs
    except Exception as e:  # pragma: no cover
        check(False, "scheme_dipy_import", str(e))
        return
    bvals = os.path.join(TMP, "scheme.bval")
    bvecs = os.path.join(TMP, "scheme.bvec")
    rc, err = run(exe, "scheme", "3x0,30x1000,60x2500", bvals, bvecs)
    if rc != 0:
        check(False, "scheme_write", err)
        return
    b, g = read_bvals_bvecs(bvals, bvecs)
    try:
        # DIPY checks that b>0 directions are unit vectors; b=0 ones may be (0,0,0).
        gtab = gradient_table(b, bvecs=g)
        ok = (len(b) == 93 and int(gtab.b0s_mask.sum()) == 3 and
              np.allclose(np.linalg.norm(g[3:], axis=1), 1, atol=1e-9) and
              np.all(g[:3] == 0))
        check(ok, "scheme_dipy_gradient_table", f"{len(b)} volumes, "
              f"{int(gtab.b0s_mask.sum())} b0")
    except Exception as e:
        check(False, "scheme_dipy_gradient_table", str(e))


def main():
    exe = build_driver()
    if isinstance(exe, tuple):
        check(False, "build_driver", exe[1][-2000:])
        return
    test_writer(exe)
    test_reader(exe)
    test_scheme_with_dipy(exe)


main()
sys.exit(1 if failures else 0)
