"""TRX and TrackVis .trk tractograms, read and written by dimoc, against trx-python and nibabel.

(a) Writing.  `dimoc track --fod` with --format trx / trk, the same seed as a .tck run: the
    TRX loaded by trx-python (trx_file_memmap.load) holds the .tck's streamlines point for point,
    bit for bit (float32 positions), header.json's NB_STREAMLINES / NB_VERTICES, the FOD's grid
    (DIMENSIONS, VOXEL_TO_RASMM) and TCK_HEADER's count / total_count / step_size as the .tck's
    header has them; the .trk loaded by nibabel (nib.streamlines.load, its voxel-mm -> RAS+
    conversion) within float32 rounding of the conversion (4 ulp of the coordinate's size), with
    n_count the streamline count and the FOD's grid.  The probabilistic tracker's
    --save-streamlines with --format trx: the same streamlines as its .tck.  `dimoc merge` of two
    --part runs with --format trx (and trk) gives the whole run's streamlines and counts.
(b) Reading.  TRX files written by trx-python from one set of random streamlines: float16
    positions with uint32 offsets in a deflated zip, float32 / uint64 in a stored zip with dps
    weights and groups, float64 / uint32 as a folder; .trk files written by nibabel, one on an
    axis-permuted, flipped, anisotropic grid whose voxel_order differs from vox_to_ras's own
    (every conversion exact in float32), one on an oblique grid.  `dimoc tdi`, `dimoc connectome`
    and `dimoc commit --tractogram` give on each the outputs they give on a .tck (written by
    nibabel) of the same streamlines as trx-python / nibabel load them: equal maps, equal csv
    text, equal weights (the oblique .trk: nibabel rounds its conversion in float32, dimoc in
    double: a few voxels of the map may differ, at most 1 in 1000).  --weights dps:weights
    equals --weights FILE of the same values.
(c) `dimoc commit --format trx`: filtered.trx holds filtered.tck's streamlines and its dps
    commit_weights streamline_weights.txt's nonzero values (within the text's 6 digits); trk
    likewise with the property commit_weights.
(d) Bad inputs refused in one line naming the file and the fault, a non-zero exit and no output:
    a TRX whose offsets run past its positions, one without header.json, one whose NB_VERTICES
    is wrong, one with a group index past NB_STREAMLINES; a .trk without the TRACK magic, with
    a wrong hdr_size, with n_count above and below the streamlines it holds, cut short inside a
    streamline; --weights dps:NAME on a .tck or with no such dps.
Needs trx-python (scripts/install-deps.sh installs it)."""
import json
import os
import shutil
import struct
import zipfile

import nibabel as nib
import numpy as np

import commitpeer as cp
import fodsim
from dmtest import check, check_refused, dimoc, finish, save, workdir
from test_tractogram_mrtrix import oblique_affine, parcellation, random_streamlines

try:
    import trx.trx_file_memmap as tmm
except ImportError:  # reported as a failure in main()
    tmm = None

Field = nib.streamlines.Field


def write_tck(path, streamlines):
    nib.streamlines.save(nib.streamlines.Tractogram([np.asarray(s, np.float32) for s in streamlines],
                                                    affine_to_rasmm=np.eye(4)), path)
    return path


def load_map(path):
    img = nib.load(path)
    return np.asarray(img.dataobj), img.get_data_dtype()


def same_streamlines(a, b):
    return len(a) == len(b) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))


def tck_header(path):
    return fodsim.tck_header(path)


# ---- (a) writing ----------------------------------------------------------------------------

def test_track_outputs(d):
    os.makedirs(f"{d}/fod")
    p = fodsim.phantom(f"{d}/fod")
    fod = nib.load(p["fod"])
    common = ["--fod", p["fod"], "--seed", p["wm"], "--select", 500, "--rseed", 5, "--threads", 2,
              "--device", "cpu"]
    for fmt in ("tck", "trx", "trk"):
        dimoc("track", *common, "--out", f"{d}/fod_{fmt}", "--format", fmt)
    tck = f"{d}/fod_tck/tracks.tck"
    ref = nib.streamlines.load(tck).streamlines
    head = tck_header(tck)
    t = tmm.load(f"{d}/fod_trx/tracks.trx")
    h = t.header
    grid_ok = np.array_equal(h["DIMENSIONS"], fod.shape[:3]) and \
        np.allclose(h["VOXEL_TO_RASMM"], fod.affine, rtol=0, atol=1e-5)
    th = h.get("TCK_HEADER", {})
    counts = (h["NB_STREAMLINES"] == len(ref) and h["NB_VERTICES"] == sum(len(s) for s in ref)
              and int(th.get("count", -1)) == int(head["count"])
              and int(th.get("total_count", -1)) == int(head["total_count"]) > len(ref)
              and th.get("step_size") == head["step_size"])
    check("trx_track_equals_tck", same_streamlines(t.streamlines, ref) and len(ref) == 500 and grid_ok and counts
          and t.streamlines._data.dtype == np.float32,
          f"{len(t.streamlines)} vs {len(ref)} streamlines, grid {grid_ok}, counts {counts} "
          f"({th.get('count')}/{th.get('total_count')} vs {head['count']}/{head['total_count']})")
    t.close()
    k = nib.streamlines.load(f"{d}/fod_trk/tracks.trk")
    # float32 rounding of the conversion: 4 ulp of the largest coordinate it passes through
    # (world mm, or voxel mm up to the grid's extent)
    kh = k.header
    extent = max(float(np.max(np.abs(ref._data))), float(np.max(kh[Field.DIMENSIONS] * kh[Field.VOXEL_SIZES])))
    ulp4 = 4 * float(np.spacing(np.float32(extent)))
    worst = max(float(np.max(np.abs(x - y))) for x, y in zip(k.streamlines, ref)) / ulp4
    ok = (len(k.streamlines) == len(ref) and kh[Field.NB_STREAMLINES] == len(ref) and worst <= 1
          and np.array_equal(kh[Field.DIMENSIONS], fod.shape[:3])
          and np.allclose(kh[Field.VOXEL_TO_RASMM], fod.affine, atol=1e-5)
          and all(len(x) == len(y) for x, y in zip(k.streamlines, ref)))
    check("trk_track_equals_tck", ok, f"{len(k.streamlines)} streamlines, largest difference {worst:.2f} of 4 ulp")
    # the two read back by dimoc give the .tck's TDI (TCK_HEADER's / reserved step_size: the same
    # upsampling)
    maps = {}
    for fmt in ("tck", "trx", "trk"):
        dimoc("tdi", f"{d}/fod_{fmt}/tracks.{fmt}", "--template", p["fod"], "--out", f"{d}/tdi_{fmt}.nii.gz")
        maps[fmt] = load_map(f"{d}/tdi_{fmt}.nii.gz")[0]
    diff_trk = int((maps["trk"] != maps["tck"]).sum())
    check("trx_trk_track_read_back", np.array_equal(maps["trx"], maps["tck"]) and diff_trk <= maps["tck"].size // 1000
          and maps["tck"].sum() > 0, f"trk map differs in {diff_trk} voxels")
    # parts merged
    part = ["--fod", p["fod"], "--seed", p["wm"], "--seeds", 600, "--rseed", 9, "--threads", 2, "--device", "cpu"]
    for fmt in ("trx", "trk"):
        dimoc("track", *part, "--out", f"{d}/whole_{fmt}", "--format", fmt)
        for k_ in (1, 2):
            dimoc("track", *part, "--out", f"{d}/p{k_}_{fmt}", "--format", fmt, "--part", f"{k_}/2")
        dimoc("merge", f"{d}/p1_{fmt}", f"{d}/p2_{fmt}", "--out", f"{d}/merged_{fmt}")
        if fmt == "trx":
            a, b = tmm.load(f"{d}/whole_trx/tracks.trx"), tmm.load(f"{d}/merged_trx/tracks.trx")
            ok = same_streamlines(a.streamlines, b.streamlines) and len(a.streamlines) > 0 and \
                a.header["TCK_HEADER"]["total_count"] == b.header["TCK_HEADER"]["total_count"] and \
                a.header["TCK_HEADER"]["count"] == b.header["TCK_HEADER"]["count"]
            detail = f"{len(a.streamlines)} vs {len(b.streamlines)} streamlines"
            a.close()
            b.close()
        else:
            a, b = (nib.streamlines.load(f"{d}/{o}_trk/tracks.trk") for o in ("whole", "merged"))
            ok = same_streamlines(a.streamlines, b.streamlines) and len(a.streamlines) > 0 and \
                a.header[Field.NB_STREAMLINES] == b.header[Field.NB_STREAMLINES] and \
                a.header["reserved"].split(b"\ncount:")[1] == b.header["reserved"].split(b"\ncount:")[1] and \
                open(f"{d}/whole_trk/tracks.trk", "rb").read()[1000:] == open(f"{d}/merged_trk/tracks.trk", "rb").read()[1000:]
            detail = f"{len(a.streamlines)} vs {len(b.streamlines)} streamlines"
        check(f"{fmt}_merge_parts", ok, detail)


def bedpostx_phantom(d, shape=(30, 8, 8), ns=20):
    """A bedpostx-style folder of fibres along x with a 10 degree spread, 2 mm voxels."""
    aff = np.array([[2.0, 0, 0, -20], [0, 2, 0, 4], [0, 0, 2, -6], [0, 0, 0, 1]])
    rng = np.random.default_rng(8)
    v = np.zeros(shape + (ns, 3))
    v[..., 0] = -1
    v += rng.normal(scale=np.radians(10), size=v.shape)
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    os.makedirs(d, exist_ok=True)
    save(f"{d}/merged_th1samples.nii.gz", np.arccos(np.clip(v[..., 2], -1, 1)), aff)
    save(f"{d}/merged_ph1samples.nii.gz", np.arctan2(v[..., 1], v[..., 0]), aff)
    save(f"{d}/merged_f1samples.nii.gz", np.full(shape + (ns,), 0.6), aff)
    save(f"{d}/nodif_brain_mask.nii.gz", np.ones(shape), aff)
    seed = np.zeros(shape)
    seed[10:12, 3:5, 3:5] = 1
    return save(f"{d}/seed.nii.gz", seed, aff)


def test_probabilistic(d):
    seed = bedpostx_phantom(f"{d}/bp")
    args = ["track", "--samples", f"{d}/bp", "--seed", seed, "-P", 20, "-c", 0.8, "--save-max", 90]
    dimoc(*args, "--out", f"{d}/prob_tck", "--save-streamlines", f"{d}/kept.tck")
    dimoc(*args, "--out", f"{d}/prob_trx", "--save-streamlines", f"{d}/kept.tck", "--format", "trx")
    ref = nib.streamlines.load(f"{d}/kept.tck").streamlines
    t = tmm.load(f"{d}/kept.trx")
    ok = same_streamlines(t.streamlines, ref) and len(ref) == 90 and \
        np.array_equal(t.header["DIMENSIONS"], nib.load(seed).shape)
    check("trx_save_streamlines", ok, f"{len(t.streamlines)} vs {len(ref)} streamlines")
    t.close()


# ---- (b) reading ----------------------------------------------------------------------------

def trx_variants(d, streamlines, img, weights, groups):
    """TRX files of the streamlines by trx-python; per variant its path and the streamlines as
    trx-python loads them back (float16 positions are rounded)."""
    variants = {
        "f16_u32_deflated": (np.float16, np.uint32, zipfile.ZIP_DEFLATED, ".trx"),
        "f32_u64_stored_dps_groups": (np.float32, np.uint64, zipfile.ZIP_STORED, ".trx"),
        "f64_u32_folder": (np.float64, np.uint32, None, "_folder.trx"),
    }
    out = {}
    for name, (pos, off, comp, ext) in variants.items():
        tg = nib.streamlines.Tractogram(streamlines, affine_to_rasmm=np.eye(4))
        if "dps" in name:
            tg.data_per_streamline["weights"] = weights[:, None].astype(np.float32)
        t = tmm.TrxFile.from_tractogram(tg, img, dtype_dict={"positions": pos, "offsets": off, "dpv": {}, "dps": {}})
        if "groups" in name:
            for g, idx in groups.items():
                t.groups[g] = np.asarray(idx, np.uint32)
        path = f"{d}/{name}{ext}"
        if comp is None:
            tmm.save(t, path[:-4])  # a folder (trx-python names folders without an ending)
            os.rename(path[:-4], path)
        else:
            tmm.save(t, path, comp)
        t.close()
        back = tmm.load(path)
        sl = [np.array(s, np.float32) for s in back.streamlines]  # copies: the memmap closes
        info = {"dtype": back.streamlines._data.dtype, "offsets": back.streamlines._offsets.dtype,
                "dps": sorted(back.data_per_streamline), "groups": sorted(back.groups)}
        back.close()
        out[name] = (path, sl, info)
    return out


def trk_files(d, streamlines):
    """Two .trk files by nibabel: an exact grid (permuted, flipped, anisotropic, voxel_order LAS
    against a vox_to_ras of another orientation) and an oblique one; per file its path and the
    streamlines as nibabel loads them."""
    out = {}
    exact = np.array([[0, -2.0, 0, 40.5], [0.5, 0, 0, -20.25], [0, 0, 1.0, -10.0], [0, 0, 0, 1]])
    oblique = oblique_affine([1.5, 2.0, 2.5], [-21.3, -30.7, -14.9])
    for name, aff, order, sl in (("exact", exact, "LAS", [np.round(s * 64) / 64 for s in streamlines]),
                                 ("oblique", oblique, "RAS", streamlines)):
        zooms = np.sqrt((aff[:3, :3] ** 2).sum(0))
        hdr = {Field.VOXEL_TO_RASMM: aff, Field.VOXEL_SIZES: zooms, Field.DIMENSIONS: np.array([40, 50, 30]),
               Field.VOXEL_ORDER: order}
        path = f"{d}/{name}.trk"
        nib.streamlines.save(nib.streamlines.Tractogram([np.asarray(s, np.float32) for s in sl],
                                                        affine_to_rasmm=np.eye(4)), path, header=hdr)
        back = nib.streamlines.load(path)
        out[name] = (path, [np.asarray(s, np.float32) for s in back.streamlines], back.header)
    return out


def test_readers(d, rng):
    shape = (24, 26, 20)
    aff = oblique_affine([2.0, 2.0, 2.0], [-20, -30, -15])
    template = save(f"{d}/template.nii.gz", np.zeros(shape), aff)
    img = nib.load(template)
    parc = save(f"{d}/parc.nii.gz", parcellation(rng, (16, 18, 14)), oblique_affine([3.0, 3.0, 3.0], [-21, -31, -16]))
    streamlines = random_streamlines(rng, 500, aff, shape)
    weights = rng.uniform(0.05, 3.0, len(streamlines)).astype(np.float32)
    groups = {"first": np.arange(0, 100), "odd": np.arange(1, 500, 2)}
    cases = {}
    for name, (path, sl, info) in trx_variants(d, streamlines, img, weights, groups).items():
        cases["trx_" + name] = (path, sl, info)
    for name, (path, sl, _) in trk_files(d, streamlines).items():
        cases["trk_" + name] = (path, sl, None)
    info = cases["trx_f32_u64_stored_dps_groups"][2]
    check("trx_python_wrote_variants", info["dps"] == ["weights"] and info["groups"] == ["first", "odd"]
          and cases["trx_f16_u32_deflated"][2]["dtype"] == np.float16
          and cases["trx_f64_u32_folder"][2]["offsets"] == np.uint32 and os.path.isdir(cases["trx_f64_u32_folder"][0]),
          str({k: v[2] for k, v in cases.items() if v[2]}))
    np.savetxt(f"{d}/weights.txt", weights, fmt="%.9g")
    for name, (path, sl, _) in cases.items():
        tck = write_tck(f"{d}/{name}.tck", sl)
        limit = 0 if name != "trk_oblique" else shape[0] * shape[1] * shape[2] // 1000
        outs = []
        for src, tag in ((tck, "tck"), (path, "other")):
            dimoc("tdi", src, "--template", template, "--out", f"{d}/{name}_{tag}_tdi.nii.gz")
            dimoc("connectome", src, "--parc", parc, "--out", f"{d}/{name}_{tag}_conn")
            outs.append((load_map(f"{d}/{name}_{tag}_tdi.nii.gz"),
                         open(f"{d}/{name}_{tag}_conn/connectome.csv").read(),
                         open(f"{d}/{name}_{tag}_conn/mean_length.csv").read()))
        (m0, t0), c0, l0 = outs[0]
        (m1, t1), c1, l1 = outs[1]
        ndiff = int((m0 != m1).sum())
        conn_ok = c0 == c1 and l0 == l1 if limit == 0 else \
            np.abs(np.loadtxt(c0.splitlines(), delimiter=",") - np.loadtxt(c1.splitlines(), delimiter=",")).sum() <= 4
        check(f"read_{name}_tdi_connectome", ndiff <= limit and t0 == t1 and m0.sum() > 0 and conn_ok,
              f"{ndiff} voxels differ (at most {limit}), types {t0}/{t1}, connectome equal {c0 == c1}, "
              f"mean lengths equal {l0 == l1}")
    # weights from the TRX's dps against the same values in a file
    path = cases["trx_f32_u64_stored_dps_groups"][0]
    tck = f"{d}/trx_f32_u64_stored_dps_groups.tck"
    dimoc("tdi", path, "--template", template, "--out", f"{d}/w_dps.nii.gz", "--weights", "dps:weights")
    dimoc("tdi", tck, "--template", template, "--out", f"{d}/w_file.nii.gz", "--weights", f"{d}/weights.txt")
    dimoc("connectome", path, "--parc", parc, "--out", f"{d}/wc_dps", "--weights", "dps:weights")
    dimoc("connectome", tck, "--parc", parc, "--out", f"{d}/wc_file", "--weights", f"{d}/weights.txt")
    a, b = load_map(f"{d}/w_dps.nii.gz"), load_map(f"{d}/w_file.nii.gz")
    same_conn = all(open(f"{d}/wc_dps/{f}").read() == open(f"{d}/wc_file/{f}").read()
                    for f in ("connectome.csv", "mean_length.csv"))
    check("read_trx_dps_weights", np.array_equal(a[0], b[0]) and a[1] == b[1] == np.float32 and same_conn
          and a[0].sum() > 0, f"maps equal {np.array_equal(a[0], b[0])}, connectomes equal {same_conn}")
    return cases


def run_commit(p, tractogram, out, *extra):
    return dimoc("commit", "--tractogram", tractogram, "--data", p["dwi"], "--mask", p["wm"], "--bvals",
                 p["bvals_file"], "--bvecs", p["bvecs_file"], "--peaks", p["peaks"], "--out", out,
                 "--device", "cpu", "--threads", 2, *extra)


def test_commit(d):
    p = cp.phantom(f"{d}/phantom", n_true=40, n_false=10)
    img = nib.load(p["dwi"])
    sl = [np.asarray(s, np.float32) for s in p["streamlines"]]
    rng = np.random.default_rng(4)
    lw = rng.uniform(0.5, 1.5, len(sl)).astype(np.float32)
    np.savetxt(f"{d}/lw.txt", lw, fmt="%.9g")
    tg = nib.streamlines.Tractogram(sl, affine_to_rasmm=np.eye(4))
    tg.data_per_streamline["lw"] = lw[:, None]
    t = tmm.TrxFile.from_tractogram(tg, img)
    tmm.save(t, f"{d}/in.trx")
    t.close()
    tck = write_tck(f"{d}/in.tck", sl)
    run_commit(p, tck, f"{d}/c_tck", "--lambda", 0.02, "--lambda-weights", f"{d}/lw.txt")
    run_commit(p, f"{d}/in.trx", f"{d}/c_trx", "--lambda", 0.02, "--lambda-weights", "dps:lw")
    same = open(f"{d}/c_tck/streamline_weights.txt").read() == open(f"{d}/c_trx/streamline_weights.txt").read()
    ic = [load_map(f"{d}/{o}/compartment_IC.nii.gz")[0] for o in ("c_tck", "c_trx")]
    check("read_trx_commit", same and np.array_equal(*ic), f"weights equal {same}")
    # (c) the filtered tractogram as TRX and .trk
    run_commit(p, tck, f"{d}/f_tck")
    w = np.loadtxt(f"{d}/f_tck/streamline_weights.txt")
    ref = nib.streamlines.load(f"{d}/f_tck/filtered.tck").streamlines
    for fmt in ("trx", "trk"):
        run_commit(p, tck, f"{d}/f_{fmt}", "--format", fmt)
        if fmt == "trx":
            t = tmm.load(f"{d}/f_trx/filtered.trx")
            sl_f, cw = t.streamlines, np.array(t.data_per_streamline["commit_weights"])[:, 0]
            grid = np.array_equal(t.header["DIMENSIONS"], img.shape[:3])
            exact = same_streamlines(sl_f, ref)
            t.close()
        else:
            k = nib.streamlines.load(f"{d}/f_trk/filtered.trk")
            sl_f, cw = k.streamlines, k.tractogram.data_per_streamline["commit_weights"][:, 0]
            grid = np.array_equal(k.header[Field.DIMENSIONS], img.shape[:3])
            exact = len(sl_f) == len(ref) and all(np.allclose(x, y, rtol=0, atol=1e-4) for x, y in zip(sl_f, ref))
        wt = w[w > 0]
        ok = exact and grid and len(cw) == len(wt) == len(ref) > 0 and np.allclose(cw, wt, rtol=6e-6, atol=0) and \
            not os.path.exists(f"{d}/f_{fmt}/filtered.tck")
        check(f"commit_filtered_{fmt}", ok, f"{len(cw)} weights for {len(ref)} streamlines")


# ---- (d) bad inputs ------------------------------------------------------------------------

def rewrite_zip(src, dst, change):
    """A copy of the zip src with members changed: change(name, bytes) -> bytes or None (left out)."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w") as zo:
        for info in zi.infolist():
            data = change(info.filename, zi.read(info.filename))
            if data is not None:
                zo.writestr(info.filename, data)
    return dst


def test_bad_inputs(d, cases):
    template = f"{d}/template.nii.gz"
    good = cases["trx_f32_u64_stored_dps_groups"][0]
    with zipfile.ZipFile(good) as z:
        head = json.loads(z.read("header.json"))

    def past(name, data):
        if name.startswith("offsets."):
            o = np.frombuffer(data, np.uint64).copy()
            o[-2] = o[-1] + 7
            return o.tobytes()
        return data

    def vertices(name, data):
        return json.dumps(dict(head, NB_VERTICES=head["NB_VERTICES"] + 3)).encode() if name == "header.json" else data

    def group(name, data):
        return np.array([3, 1000000], np.uint32).tobytes() if name == "groups/first.uint32" else data

    bad = {
        "offsets_past": (rewrite_zip(good, f"{d}/bad_offsets.trx", past), "past the"),
        "no_header": (rewrite_zip(good, f"{d}/bad_header.trx", lambda n, b: None if n == "header.json" else b),
                      "no header.json"),
        "nb_vertices": (rewrite_zip(good, f"{d}/bad_vertices.trx", vertices), "NB_VERTICES"),
        "group_index": (rewrite_zip(good, f"{d}/bad_group.trx", group), "groups/first.uint32"),
    }
    trk = open(cases["trk_exact"][0], "rb").read()
    n = struct.unpack("<i", trk[988:992])[0]
    bad["trk_magic"] = (f"{d}/bad_magic.trk", "TRACK")
    open(bad["trk_magic"][0], "wb").write(b"TRACE" + trk[5:])
    bad["trk_hdr_size"] = (f"{d}/bad_hdr.trk", "hdr_size")
    open(bad["trk_hdr_size"][0], "wb").write(trk[:996] + struct.pack("<i", 1001) + trk[1000:])
    bad["trk_count_high"] = (f"{d}/bad_count_high.trk", "n_count")
    open(bad["trk_count_high"][0], "wb").write(trk[:988] + struct.pack("<i", n + 1) + trk[992:])
    bad["trk_count_low"] = (f"{d}/bad_count_low.trk", "n_count")
    open(bad["trk_count_low"][0], "wb").write(trk[:988] + struct.pack("<i", n - 1) + trk[992:])
    bad["trk_truncated"] = (f"{d}/bad_cut.trk", "truncated")
    open(bad["trk_truncated"][0], "wb").write(trk[:len(trk) - 30])
    for name, (path, words) in bad.items():
        out = f"{d}/refused_{name}.nii.gz"
        result = dimoc("tdi", path, "--template", template, "--out", out, expect_ok=False)
        check_refused(f"bad_{name}", result, words, out)
        check(f"bad_{name}_names_file", path in result[2], result[2].strip())
    tck = f"{d}/trx_f32_u64_stored_dps_groups.tck"
    check_refused("bad_dps_on_tck", dimoc("tdi", tck, "--template", template, "--out", f"{d}/r1.nii.gz",
                                          "--weights", "dps:weights", expect_ok=False), "a .tck has none", f"{d}/r1.nii.gz")
    check_refused("bad_dps_name", dimoc("tdi", good, "--template", template, "--out", f"{d}/r2.nii.gz",
                                        "--weights", "dps:nothing", expect_ok=False), "no dps named 'nothing'",
                  f"{d}/r2.nii.gz")
    left = [f for f in os.listdir(d) if ".tmp." in f]
    check("bad_inputs_leave_nothing", not left, str(left))


def main():
    if tmm is None:
        check("trx_python_installed", False, "trx-python is not installed (scripts/install-deps.sh installs it)")
        return
    d = workdir("trx_trk")
    rng = np.random.default_rng(31)
    cases = test_readers(d, rng)
    test_bad_inputs(d, cases)
    os.makedirs(f"{d}/track")
    test_track_outputs(f"{d}/track")
    test_probabilistic(f"{d}/track")
    os.makedirs(f"{d}/commit")
    test_commit(f"{d}/commit")
    shutil.rmtree(f"{d}/track/fod", ignore_errors=True)


main()
finish()
