"""The group level of the BIDS App, `dimoc bids BIDS_DIR OUTPUT_DIR group`: group/dimoc_qc.tsv
and group/dimoc_report.html from the participant level's per-run qc files.

(a) A study made here as the participant level leaves it: 13 runs (sub-01..sub-06 without
    sessions, sub-07 and sub-08 with two sessions each, pipeline `dki`; three runs acq-b2000 of
    sub-01..03 by pipeline `noddi_dti`), each with its brain mask and maps (NIfTI from nibabel), its
    P_qc.json (the figures and the maps' medians in the mask, computed here with numpy) and its
    pictures (written by `dimoc view`; sub-08 ses-2's in sub-08/ses-2/figures/, and one picture
    the group level does not expect by its name, which it shows too).  sub-04 is made deviant by 30% flagged voxels, sub-05 by
    an FA shifted by +0.15; in the noddi_dti runs `flagged` is 0, 0, 7 (MAD 0: the third is marked,
    z inf) and the residual is null (n/a).  One picture is deleted: the page must list it as
    missing.
(b) The TSV against numpy: the columns, one row per run, the figures against the masks and maps
    read back with nibabel (voxels, medians), flagged / voxels_in_mask, the robust z of every figure
    (x - median) / (1.4826 MAD) over the runs of the same pipeline, the outlier column equal to
    the set of |z| > 3.5 (and holding sub-04's flagged fraction and sub-05's FA), the column
    descriptions of dimoc_qc.json.  --z-limit 1000 leaves only the MAD-0 mark; --pipeline
    noddi_dti keeps its runs only, z unchanged.
(c) The page in headless Chromium (Debian's, driven by Playwright): loaded from file:// with no
    console error, no page error and no request outside the output folder; every <img> loaded
    (naturalWidth > 0), and they are exactly the pictures that exist; the missing one listed; one
    table row per run with the TSV's text in every cell and its z in data-z; outlier rows and
    the cells beyond the limit marked, and drawn differently; sorting by a column's heading
    orders the rows by its values, both ways, without an error.  A screenshot is left in the
    test's folder (tests/tmp/bids_group/report.png).
(d) Bad inputs: malformed qc files (not JSON, a wrong type, a subject not its folder's) reported
    one line each naming the file, left out of the table, exit status non-zero; an output folder
    without qc files (one line, non-zero, no group/); a group/ that cannot be written (a file of
    that name; a folder the user may not write, run as `nobody` where the test is root): one
    line, non-zero, and an earlier group output left as it was.
(e) End to end: `dimoc bids ... participant --pipeline noddi_dti` on four simulated subjects
    (sub-04 with a lower intra-neurite fraction), then the group level: the TSV against the qc
    files and against numpy's medians of the maps in the masks the participant level wrote,
    sub-04's NDI marked, the page as in (c) with no picture missing.

Needs Debian's chromium and Playwright (scripts/install-deps.sh installs both); the test fails
with that message where they are missing."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
from urllib.parse import unquote, urlparse

import nibabel as nib
import numpy as np

from dmtest import DIMOC, check, dimoc, finish, workdir

CHROMIUM = "/usr/bin/chromium"
Z_LIMIT = 3.5
SHAPE = (24, 24, 14)
AFFINE = np.diag([2.0, 2.0, 2.5, 1.0])


def ellipsoid(rng):
    """A brain-like mask of random radii."""
    r = rng.uniform([7, 8, 4.5], [10, 11, 6.5])
    x, y, z = np.meshgrid(*[np.arange(n) - (n - 1) / 2 for n in SHAPE], indexing="ij")
    return ((x / r[0]) ** 2 + (y / r[1]) ** 2 + (z / r[2]) ** 2) <= 1


def save_nifti(path, data, dtype=np.float32):
    nib.save(nib.Nifti1Image(np.asarray(data, dtype=dtype), AFFINE), path)


class Run:
    def __init__(self, sub, ses, acq, pipeline):
        self.sub, self.ses, self.pipeline = sub, ses, pipeline
        self.prefix = f"sub-{sub}" + (f"_ses-{ses}" if ses else "") + (f"_acq-{acq}" if acq else "")
        self.dwi = f"sub-{sub}" + (f"/ses-{ses}" if ses else "") + "/dwi"


def study_runs():
    runs = [Run(f"{s:02d}", None, "b1000", "dki") for s in range(1, 7)]
    runs += [Run(f"{s:02d}", ses, "b1000", "dki") for s in (7, 8) for ses in ("1", "2")]
    runs += [Run(f"{s:02d}", None, "b2000", "noddi_dti") for s in (1, 2, 3)]
    return runs


# pipeline -> (model label, {param: (mean, sd) of the runs' medians})
MODELS = {"dki": ("dki", {"FA": (0.45, 0.03), "MD": (7.5e-4, 0.3e-4)}),
          "noddi_dti": ("noddidti", {"ODI": (0.3, 0.02), "NDI": (0.55, 0.03)})}


def make_study(out, rng):
    """Writes the participant level's files for study_runs(); returns {prefix: Run}."""
    os.makedirs(out)
    with open(os.path.join(out, "dataset_description.json"), "w") as f:
        json.dump({"Name": "dimoc", "BIDSVersion": "1.9.0", "DatasetType": "derivative",
                   "GeneratedBy": [{"Name": "dimoc"}]}, f)
    runs = {}
    noddi_flagged = iter([0, 0, 7])
    for r in study_runs():
        dwi = os.path.join(out, r.dwi)
        # sub-08 ses-2's pictures in its session's folder, where a participant level may put them
        figures = os.path.join(out, f"sub-{r.sub}", *(["ses-2"] if (r.sub, r.ses) == ("08", "2") else []),
                               "figures")
        os.makedirs(dwi, exist_ok=True)
        os.makedirs(figures, exist_ok=True)
        mask = ellipsoid(rng)
        mask_path = os.path.join(dwi, f"{r.prefix}_space-dwi_desc-brain_mask.nii.gz")
        save_nifti(mask_path, mask, np.uint8)
        dimoc("view", mask_path, "-o", os.path.join(figures, f"{r.prefix}_space-dwi_desc-brain_mask.png"))
        medians = {}
        model, params = MODELS[r.pipeline]
        for param, (mean, sd) in params.items():
            centre = mean + (0.15 if (r.sub == "05" and param == "FA") else 0.0)
            centre += rng.normal(0, sd)
            data = np.where(mask, rng.normal(centre, 4 * sd, SHAPE), 0.0)
            name = f"{r.prefix}_space-dwi_model-{model}_param-{param}_dwimap"
            save_nifti(os.path.join(dwi, name + ".nii.gz"), data)
            with open(os.path.join(dwi, name + ".json"), "w") as f:
                json.dump({"Model": model, "Parameter": param}, f)
            dimoc("view", os.path.join(dwi, name + ".nii.gz"), "-o", os.path.join(figures, name + ".png"))
            medians[f"{model}_{param}"] = float(np.median(data[mask]))
        if r.prefix == "sub-01_acq-b1000":  # a picture the group level does not expect
            dimoc("view", mask_path, "-o", os.path.join(figures, f"{r.prefix}_space-dwi_desc-extra_mask.png"))
        n = int(mask.sum())
        if r.pipeline == "noddi_dti":
            flagged = next(noddi_flagged)
        else:
            flagged = int(round(0.30 * n)) if r.sub == "04" else int(rng.integers(5, 15))
        secs = {"read": float(rng.uniform(0.5, 0.7)), "fit": float(rng.uniform(3, 4)),
                "write": float(rng.uniform(0.2, 0.3))}
        secs["total"] = sum(secs.values())
        qc = {"subject": r.sub, "session": r.ses, "run_prefix": r.prefix, "pipeline": r.pipeline,
              "voxels_in_mask": n, "fitted": n - flagged, "flagged": flagged,
              "residual_median": None if r.pipeline == "noddi_dti" else float(rng.normal(12.0, 0.5)),
              "medians": medians, "seconds": secs}
        with open(os.path.join(dwi, f"{r.prefix}_qc.json"), "w") as f:
            json.dump(qc, f, indent=1)
        runs[r.prefix] = r
    return runs


def read_tsv(path):
    with open(path) as f:
        lines = f.read().rstrip("\n").split("\n")
    header = lines[0].split("\t")
    return header, [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def num(text):
    return np.nan if text == "n/a" else float(text)


def close(a, b, rel, abs_=0.0):
    if np.isnan(a) or np.isnan(b):
        return np.isnan(a) and np.isnan(b)
    if np.isinf(a) or np.isinf(b):
        return a == b
    return abs(a - b) <= abs_ + rel * abs(b)


def expected_table(out, runs):
    """The figures of every run from its qc file and its files, and the robust z, by numpy."""
    qcs = {p: json.load(open(os.path.join(out, r.dwi, f"{p}_qc.json"))) for p, r in runs.items()}
    keys = sorted({k for qc in qcs.values() for k in qc["medians"]})
    figures = ["voxels_in_mask", "fitted", "flagged", "flagged_fraction", "residual_median"] + \
        keys + ["seconds_total"]
    values = {}
    for p, r in runs.items():
        qc = qcs[p]
        mask = np.asarray(nib.load(os.path.join(out, r.dwi, f"{p}_space-dwi_desc-brain_mask.nii.gz")).dataobj) > 0
        v = {"voxels_in_mask": float(mask.sum()), "fitted": float(qc["fitted"]),
             "flagged": float(qc["flagged"]), "flagged_fraction": qc["flagged"] / qc["voxels_in_mask"],
             "residual_median": np.nan if qc["residual_median"] is None else qc["residual_median"],
             "seconds_total": qc["seconds"]["total"]}
        for k in keys:
            model, param = k.split("_", 1)
            f = os.path.join(out, r.dwi, f"{p}_space-dwi_model-{model}_param-{param}_dwimap.nii.gz")
            # in double, as the medians of a float32 map are taken (numpy's own of float32 data
            # would round the mean of the two middle values to float32)
            v[k] = float(np.median(np.asarray(nib.load(f).dataobj, dtype=np.float64)[mask])) \
                if os.path.exists(f) else np.nan
        values[p] = v
    z = {p: {} for p in runs}
    for pipeline in sorted({r.pipeline for r in runs.values()}):
        members = [p for p in runs if runs[p].pipeline == pipeline]
        for fig in figures:
            x = np.array([values[p][fig] for p in members])
            ok = ~np.isnan(x)
            med = np.median(x[ok]) if ok.any() else np.nan
            mad = np.median(np.abs(x[ok] - med)) if ok.any() else np.nan
            for p, xi in zip(members, x):
                if np.isnan(xi):
                    z[p][fig] = np.nan
                elif mad > 0:
                    z[p][fig] = (xi - med) / (1.4826 * mad)
                else:
                    z[p][fig] = 0.0 if xi == med else np.copysign(np.inf, xi - med)
    return figures, values, z


def check_tsv(out, runs, tag, z_limit=Z_LIMIT, only=None):
    """The TSV against numpy; returns its rows."""
    header, rows = read_tsv(os.path.join(out, "group", "dimoc_qc.tsv"))
    want_runs = {p: r for p, r in runs.items() if only is None or r.pipeline == only}
    figures, values, z = expected_table(out, want_runs)
    want_header = ["subject", "session", "run_prefix", "pipeline"] + figures + \
        [f"z_{f}" for f in figures] + ["outlier"]
    check(f"{tag}: columns", header == want_header,
          f"{header} != {want_header}" if header != want_header else f"{len(header)}")
    got = {row["run_prefix"]: row for row in rows}
    check(f"{tag}: one row per run", len(rows) == len(want_runs) and set(got) == set(want_runs),
          f"{len(rows)} rows for {len(want_runs)} runs; {sorted(set(got) ^ set(want_runs))}")
    bad, zbad, outbad = [], [], []
    for p, r in want_runs.items():
        row = got.get(p)
        if row is None:
            continue
        if (row["subject"], row["session"], row["pipeline"]) != (r.sub, r.ses or "n/a", r.pipeline):
            bad.append(f"{p}: names {row['subject']} {row['session']} {row['pipeline']}")
        for fig in figures:
            # 6 significant digits in the TSV
            if not close(num(row[fig]), values[p][fig], 6e-6):
                bad.append(f"{p} {fig}: {row[fig]} vs {values[p][fig]:.9g}")
            zt = num(row[f"z_{fig}"])
            if not close(zt, z[p][fig], 1e-6, 6e-4):  # 3 decimals
                zbad.append(f"{p} {fig}: {row['z_' + fig]} vs {z[p][fig]:.6f}")
        want_out = [f for f in figures if abs(z[p][f]) > z_limit]
        got_out = [] if row["outlier"] == "none" else row["outlier"].split(",")
        if got_out != want_out:
            outbad.append(f"{p}: {got_out} vs {want_out}")
    check(f"{tag}: figures equal numpy's of the qc files, masks and maps", not bad, "; ".join(bad[:5]))
    check(f"{tag}: robust z equal numpy's (x - median) / (1.4826 MAD) per pipeline", not zbad,
          "; ".join(zbad[:5]))
    check(f"{tag}: outlier column lists exactly the figures with |z| > {z_limit:g}", not outbad,
          "; ".join(outbad[:5]))
    return rows


def launch_chromium():
    """(playwright context manager, browser) or raises with the reason."""
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(f"{CHROMIUM} not found: run scripts/install-deps.sh (Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise RuntimeError(f"Playwright not importable ({e}): run scripts/install-deps.sh")
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
    except Exception:
        pw.stop()
        raise
    return pw, browser


PAGE_FACTS = """() => {
  const imgs = Array.from(document.images).map(i => ({src: i.src, complete: i.complete,
      w: i.naturalWidth, h: i.naturalHeight}));
  const tables = Array.from(document.querySelectorAll('table.qc')).map(t => ({
      pipeline: t.dataset.pipeline,
      columns: Array.from(t.tHead.rows[0].cells).map(c => c.dataset.column),
      rows: Array.from(t.tBodies[0].rows).map(tr => ({
          run: tr.dataset.run, outlier: tr.classList.contains('outlier'),
          background: getComputedStyle(tr).backgroundColor, shadow: getComputedStyle(tr).boxShadow,
          cells: Array.from(tr.cells).map(td => ({column: td.dataset.column,
              text: td.textContent, z: td.dataset.z === undefined ? null : td.dataset.z,
              beyond: td.classList.contains('beyond'),
              background: getComputedStyle(td).backgroundColor}))}))}));
  const missing = Array.from(document.querySelectorAll('.missing code')).map(c => c.textContent);
  return {imgs, tables, missing};
}"""


def check_page(out, rows, missing, shot, tag="page", sort_pipeline=None):
    """The report in headless Chromium: `missing` the pictures it must list as missing, a
    screenshot to `shot`; sort_pipeline: the pipeline whose table is sorted by a click."""
    html = os.path.join(out, "group", "dimoc_report.html")
    try:
        pw, browser = launch_chromium()
    except Exception as e:
        check(f"{tag}: headless chromium starts", False, str(e))
        return
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        console, errors, outside = [], [], []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        root = "file://" + os.path.realpath(out) + "/"

        def request(req):
            if not req.url.startswith(root):
                outside.append(req.url)
        page.on("request", request)
        page.goto("file://" + os.path.realpath(html), wait_until="load")
        facts = page.evaluate(PAGE_FACTS)
        check(f"{tag}: loads from file:// without console or page errors", not console and not errors,
              f"console {console[:3]} errors {errors[:3]}")
        check(f"{tag}: requests nothing outside the output folder", not outside, str(outside[:3]))

        loaded = [i for i in facts["imgs"] if i["complete"] and i["w"] > 0 and i["h"] > 0]
        shown = sorted(os.path.relpath(unquote(urlparse(i["src"]).path), os.path.realpath(out))
                       for i in facts["imgs"])
        on_disk = sorted(os.path.relpath(os.path.join(dirpath, f), out)
                         for dirpath, _, files in os.walk(out) for f in files if f.endswith(".png")
                         and os.path.basename(dirpath) == "figures")
        check(f"{tag}: every <img> loaded (naturalWidth > 0)",
              len(loaded) == len(facts["imgs"]) and len(loaded) > 0,
              f"{len(loaded)} of {len(facts['imgs'])} loaded")
        check(f"{tag}: the pictures shown are those on disk", shown == on_disk,
              f"{len(shown)} shown, {len(on_disk)} on disk; {sorted(set(shown) ^ set(on_disk))[:4]}")
        check(f"{tag}: the pictures not there are listed as missing", facts["missing"] == missing,
              f"missing {facts['missing']} vs {missing}")

        by_run = {row["run_prefix"]: row for row in rows}
        n_rows = sum(len(t["rows"]) for t in facts["tables"])
        check(f"{tag}: one table row per run", n_rows == len(rows) and
              {r["run"] for t in facts["tables"] for r in t["rows"]} == set(by_run),
              f"{n_rows} rows for {len(rows)} runs")
        bad, marks, looks = [], [], []
        for t in facts["tables"]:
            for tr in t["rows"]:
                row = by_run.get(tr["run"], {})
                beyond_tsv = set() if row.get("outlier", "none") == "none" else set(row["outlier"].split(","))
                for c in tr["cells"]:
                    if row.get(c["column"]) != c["text"]:
                        bad.append(f"{tr['run']} {c['column']}: '{c['text']}' vs '{row.get(c['column'])}'")
                    if c["z"] is not None and row.get("z_" + c["column"]) != c["z"]:
                        bad.append(f"{tr['run']} z_{c['column']}: {c['z']} vs {row.get('z_' + c['column'])}")
                    if c["beyond"] != (c["column"] in beyond_tsv):
                        marks.append(f"{tr['run']} {c['column']}")
                    if c["beyond"] and c["background"] in ("rgba(0, 0, 0, 0)", tr["background"]):
                        looks.append(f"{tr['run']} {c['column']} cell not coloured")
                if tr["outlier"] != bool(beyond_tsv):
                    marks.append(f"{tr['run']} row")
                plain = [x for x in t["rows"] if not x["outlier"]]
                if tr["outlier"] and (tr["shadow"] == "none" or
                                      any(x["background"] == tr["background"] for x in plain)):
                    looks.append(f"{tr['run']} row drawn as the others")
        check(f"{tag}: every cell holds the TSV's text (figures, z in data-z)", not bad, "; ".join(bad[:4]))
        check(f"{tag}: outlier rows and the cells beyond the limit are marked as in the TSV",
              not marks, "; ".join(marks[:4]))
        check(f"{tag}: marked rows and cells are drawn differently", not looks, "; ".join(looks[:4]))

        if sort_pipeline:  # sorting its table by flagged_fraction, up then down
            table = f"table.qc[data-pipeline={sort_pipeline}]"
            order = []
            for _ in range(2):
                page.click(f"{table} thead th[data-column=flagged_fraction]")
                order.append(page.evaluate(f"""() => Array.from(document.querySelectorAll(
                    '{table} tbody tr')).map(tr =>
                    parseFloat(tr.querySelector('td[data-column=flagged_fraction]').dataset.value))"""))
            up, down = order
            n = sum(r["pipeline"] == sort_pipeline for r in rows)
            check(f"{tag}: a heading's click sorts its table by that column, both ways",
                  up == sorted(up) and down == sorted(down, reverse=True) and len(up) == n
                  and not errors and not console, f"up {up} down {down} errors {errors + console}")
        page.screenshot(path=shot, full_page=True)
        check(f"{tag}: screenshot written", os.path.getsize(shot) > 10000, shot)
    finally:
        browser.close()
        pw.stop()


def group(bids, out, *extra):
    return dimoc("bids", bids, out, "group", *extra, expect_ok=False)


def oneliner(err):
    """stderr on one line, for a check's detail."""
    return " | ".join(one_line(err))


def one_line(err):
    return [x for x in err.strip().splitlines() if x]


def bad_inputs(d, bids, good, rng):
    # Malformed qc files: left out, one line each, non-zero.
    out = os.path.join(d, "malformed")
    shutil.copytree(good, out)
    shutil.rmtree(os.path.join(out, "group"), ignore_errors=True)
    broken = {
        "sub-02/dwi/sub-02_acq-b1000_qc.json": lambda t: t[: len(t) // 2],
        "sub-03/dwi/sub-03_acq-b1000_qc.json": lambda t: t.replace('"fitted": ', '"fitted": "many", "x": '),
        "sub-07/ses-2/dwi/sub-07_ses-2_acq-b1000_qc.json": lambda t: t.replace('"subject": "07"', '"subject": "08"'),
    }
    for rel, change in broken.items():
        p = os.path.join(out, rel)
        text = open(p).read()
        open(p, "w").write(change(text))
    rc, _, err = group(bids, out)
    lines = one_line(err)
    named = [sum(os.path.join(out, rel) in line for line in lines) for rel in broken]
    check("malformed qc files: one line each naming the file, then the count; non-zero",
          rc != 0 and named == [1, 1, 1] and len(lines) == 4 and "3 of the 13" in lines[-1],
          f"rc {rc}: {oneliner(err)}")
    tsv = os.path.join(out, "group", "dimoc_qc.tsv")
    rows = read_tsv(tsv)[1] if os.path.exists(tsv) else []
    html = open(os.path.join(out, "group", "dimoc_report.html")).read() if os.path.exists(tsv) else ""
    check("malformed qc files: the others are in the table, the page lists the ones left out",
          len(rows) == 10 and all(os.path.basename(rel) in html for rel in broken),
          f"{len(rows)} rows")

    # No qc file at all.
    empty = os.path.join(d, "empty")
    os.makedirs(os.path.join(empty, "sub-01", "dwi"))
    shutil.copy(os.path.join(good, "dataset_description.json"), empty)
    rc, _, err = group(bids, empty)
    check("no qc file: one line, non-zero, nothing written",
          rc != 0 and len(one_line(err)) == 1 and "qc.json" in err and
          not os.path.exists(os.path.join(empty, "group")), f"rc {rc}: {oneliner(err)}")

    # group/ in the way: a file of that name.
    blocked = os.path.join(d, "blocked")
    shutil.copytree(good, blocked)
    shutil.rmtree(os.path.join(blocked, "group"))
    open(os.path.join(blocked, "group"), "w").write("not a folder\n")
    rc, _, err = group(bids, blocked)
    check("group is a file: one line naming it, non-zero",
          rc != 0 and len(one_line(err)) == 1 and os.path.join(blocked, "group") in err,
          f"rc {rc}: {oneliner(err)}")

    # group/ the user may not write: an earlier run's files stay as they were.
    tmp = tempfile.mkdtemp(prefix="dimoc-group-")  # reachable by nobody, wherever tests/tmp is
    try:
        os.chmod(tmp, 0o755)
        ro = os.path.join(tmp, "out")
        shutil.copytree(good, ro)
        before = {f: open(os.path.join(ro, "group", f), "rb").read()
                  for f in os.listdir(os.path.join(ro, "group"))}
        with open(os.path.join(ro, "sub-01", "dwi", "sub-01_acq-b1000_qc.json")) as f:
            qc = json.load(f)
        qc["flagged"], qc["fitted"] = qc["flagged"] + 1, qc["fitted"] - 1
        with open(os.path.join(ro, "sub-01", "dwi", "sub-01_acq-b1000_qc.json"), "w") as f:
            json.dump(qc, f)
        exe = os.path.join(tmp, "dimoc")
        shutil.copy(DIMOC, exe)
        cmd = [exe, "bids", bids, ro, "group"]
        if os.geteuid() == 0:
            for root_, dirs, files in os.walk(ro):
                for x in dirs + files:
                    os.chmod(os.path.join(root_, x), 0o755 if x in dirs else 0o644)
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
        else:
            os.chmod(os.path.join(ro, "group"), 0o555)
        p = subprocess.run(cmd, capture_output=True, text=True)
        after = {f: open(os.path.join(ro, "group", f), "rb").read()
                 for f in os.listdir(os.path.join(ro, "group"))}
        check("group/ not writable: one line naming it, non-zero, the earlier files unchanged",
              p.returncode != 0 and len(one_line(p.stderr)) == 1 and
              os.path.join(ro, "group") in p.stderr and after == before,
              f"rc {p.returncode}: {oneliner(p.stderr)}; files {sorted(after)}")
    finally:
        os.chmod(os.path.join(tmp, "out", "group"), 0o755) if os.path.isdir(os.path.join(tmp, "out", "group")) else None
        shutil.rmtree(tmp, ignore_errors=True)


def end_to_end(d):
    """participant then group on a small simulated dataset: four subjects of NODDI-Watson signal
    in an ellipsoidal head (as test_bids makes them), sub-04 with a lower intra-neurite
    fraction; pipeline noddi_dti."""
    sim, ds = os.path.join(d, "e2e-sim"), os.path.join(d, "e2e-bids")
    os.makedirs(sim)
    os.makedirs(ds)
    with open(os.path.join(ds, "dataset_description.json"), "w") as f:
        json.dump({"Name": "group end to end", "BIDSVersion": "1.9.0"}, f)
    bvals, bvecs = os.path.join(sim, "bvals"), os.path.join(sim, "bvecs")
    dimoc("scheme", "--shells", "3x0,20x1000,20x2000", "--bvals", bvals, "--bvecs", bvecs)
    shape, aff = (12, 12, 6), np.diag([2.0, 2.0, 2.0, 1.0])
    x, y, z = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    radius = np.sqrt(((x - 5.5) / 5) ** 2 + ((y - 5.5) / 5) ** 2 + ((z - 2.5) / 2.6) ** 2)
    runs = {}
    for k, (core, rest) in enumerate(((0.7, 0.3), (0.7, 0.3), (0.7, 0.3), (0.4, 0.12))):
        sub = f"{k + 1:02d}"
        maps = dict(S0=np.where(radius < 1, 1000.0, 0.0),
                    fiso=np.where(radius > 0.8, 0.9, np.where(radius < 0.45, 0.05, 0.3)),
                    fintra=np.where(radius < 0.45, core, rest), kappa=np.where(radius < 0.45, 16.0, 1.0),
                    th=np.full(shape, np.pi / 2), ph=y / 12.0 * np.pi)
        params = []
        for name, a in maps.items():
            path = os.path.join(sim, f"{sub}_{name}.nii.gz")
            nib.save(nib.Nifti1Image(a.astype(np.float32), aff), path)
            params.append(f"{name}={path}")
        dwi = os.path.join(ds, f"sub-{sub}", "dwi")
        os.makedirs(dwi)
        dimoc("simulate", "noddi_watson", "--bvals", bvals, "--bvecs", bvecs, "--params", ",".join(params),
              "--noise", "rician", "--snr", 30, "--seed", k + 1, "--out", os.path.join(dwi, f"sub-{sub}_dwi.nii.gz"))
        for f in os.listdir(dwi):
            if not f.startswith(f"sub-{sub}_dwi."):
                os.remove(os.path.join(dwi, f))  # the simulation's provenance is no BIDS file
        shutil.copy(bvals, os.path.join(dwi, f"sub-{sub}_dwi.bval"))
        shutil.copy(bvecs, os.path.join(dwi, f"sub-{sub}_dwi.bvec"))
        runs[f"sub-{sub}"] = Run(sub, None, None, "noddi_dti")
    out = os.path.join(d, "e2e-out")
    rc, _, err = dimoc("bids", ds, out, "participant", "--pipeline", "noddi_dti", expect_ok=False)
    check("end to end: participant level runs", rc == 0, f"rc {rc}: {oneliner(err)[-300:]}")
    if rc != 0:
        return
    rc, _, err = group(ds, out)
    check("end to end: group level runs", rc == 0 and not err.strip(), f"rc {rc}: {oneliner(err)}")
    if rc != 0:
        return
    rows = check_tsv(out, runs, "end to end")
    row4 = {r["run_prefix"]: r for r in rows}.get("sub-04", {})
    check("end to end: sub-04's lower intra-neurite fraction is marked",
          "noddidti_NDI" in row4.get("outlier", ""), f"sub-04: {row4.get('outlier')}, z {row4.get('z_noddidti_NDI')}")
    check_page(out, rows, [], os.path.join(d, "report-e2e.png"), "end to end: page")


def main():
    d = workdir("bids_group")
    rng = np.random.default_rng(20261202)
    bids = os.path.join(d, "bids")
    os.makedirs(bids)
    with open(os.path.join(bids, "dataset_description.json"), "w") as f:
        json.dump({"Name": "group test", "BIDSVersion": "1.9.0"}, f)
    out = os.path.join(d, "derivatives", "dimoc")
    runs = make_study(out, rng)
    deleted = "sub-03/figures/sub-03_acq-b1000_space-dwi_model-dki_param-MD_dwimap.png"
    os.remove(os.path.join(out, deleted))

    rc, _, err = group(bids, out)
    check("group level runs", rc == 0 and not err.strip(), f"rc {rc}: {oneliner(err)}")
    rows = check_tsv(out, runs, "tsv")
    by = {r["run_prefix"]: r for r in rows}
    check("tsv: sub-04's 30% flagged and sub-05's shifted FA are outliers, the MAD-0 noddi_dti run too",
          "flagged_fraction" in by.get("sub-04_acq-b1000", {}).get("outlier", "")
          and "dki_FA" in by.get("sub-05_acq-b1000", {}).get("outlier", "")
          and by.get("sub-03_acq-b2000", {}).get("z_flagged") == "inf",
          "; ".join(f"{p}: {by.get(p, {}).get('outlier')}" for p in
                    ("sub-04_acq-b1000", "sub-05_acq-b1000", "sub-03_acq-b2000")))
    group_dir = os.path.join(out, "group")
    side = json.load(open(os.path.join(group_dir, "dimoc_qc.json")))
    header = read_tsv(os.path.join(group_dir, "dimoc_qc.tsv"))[0]
    check("tsv: dimoc_qc.json describes every column",
          all(isinstance(side.get(c), dict) and side[c].get("Description") for c in header),
          str([c for c in header if c not in side]))
    check("group/ holds the three files and no temporary",
          sorted(os.listdir(group_dir)) == ["dimoc_qc.json", "dimoc_qc.tsv", "dimoc_report.html"],
          str(os.listdir(group_dir)))
    html = open(os.path.join(group_dir, "dimoc_report.html")).read()
    check("page: no address outside the page (no http, no //)",
          "http:" not in html and "https:" not in html and 'src="//' not in html, "")
    check("tsv: some run is marked", any(r["outlier"] != "none" for r in rows), "")
    check_page(out, rows, [deleted], os.path.join(d, "report.png"), sort_pipeline="dki")

    # The options: a limit no z reaches but inf, and one pipeline.
    rc, _, err = group(bids, out, "--z-limit", "1000")
    if rc == 0:
        rows = check_tsv(out, runs, "--z-limit 1000", z_limit=1000)
        check("--z-limit 1000: only the MAD-0 mark is left",
              [r["outlier"] for r in rows if r["outlier"] != "none"] == ["flagged,flagged_fraction"],
              str([r["outlier"] for r in rows if r["outlier"] != "none"]))
    else:
        check("--z-limit 1000 runs", False, oneliner(err))
    rc, _, err = group(bids, out, "--pipeline", "noddi_dti")
    if rc == 0:
        check_tsv(out, runs, "--pipeline noddi_dti", only="noddi_dti")
    else:
        check("--pipeline noddi_dti runs", False, oneliner(err))
    rc, _, err = group(bids, out, "--z-limit", "-2")
    check("--z-limit -2: one line, non-zero", rc != 0 and len(one_line(err)) == 1 and "-2" in err,
          f"rc {rc}: {oneliner(err)}")
    rc, _, err = group(bids, out, "--pipeline", "nosuch")
    check("--pipeline nosuch: one line, non-zero", rc != 0 and len(one_line(err)) == 1 and "nosuch" in err,
          f"rc {rc}: {oneliner(err)}")

    rc, _, err = group(bids, out)  # back to the whole table for the bad inputs' copies
    bad_inputs(d, bids, out, rng)
    end_to_end(d)
    finish()


if __name__ == "__main__":
    main()
