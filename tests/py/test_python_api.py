"""The Python package (python/dimoc, pyproject.toml): a wheel built by pip from the source tree,
installed with pip --target into tests/tmp, imported by a fresh interpreter outside the tree
with nothing set (no DIMOC_DATA_DIR, no DIMOC_LIBRARY), and what it says of models compared
with the program's printouts: every shipped model's parameters, inputs and outputs against
`dimoc info MODEL` and `dimoc check`'s summary of the checked tree; every bad model's
diagnostics against `dimoc check`'s lines; the generated code against `dimoc compile`'s files;
a model from source text, from a path and from a pathlib.Path alike; wrong arguments refused."""
import glob
import hashlib
import base64
import json
import os
import subprocess
import sys
import zipfile

from apicheck import number, parse_check_summary, parse_diagnostics, parse_info
from dmtest import check, dimoc, finish, workdir

ROOT = os.environ.get("ROOT", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PYTHON = sys.executable
d = workdir("python_api")

# ---- the wheel, as `pip wheel .` / `python -m build` make it, and installed elsewhere ----
p = subprocess.run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-q", "-w",
                    os.path.join(d, "wheel"), ROOT], capture_output=True, text=True)
wheels = glob.glob(os.path.join(d, "wheel", "dimoc-*.whl"))
check("python-wheel-built", p.returncode == 0 and len(wheels) == 1,
      f"rc {p.returncode}: {p.stderr[-800:]}")
if not wheels:
    finish()
wheel = wheels[0]
with open(os.path.join(ROOT, "VERSION")) as f:
    version = f.read().strip()
check("python-wheel-name", os.path.basename(wheel).startswith(f"dimoc-{version}-py3-none-linux_"),
      os.path.basename(wheel))

# The wheel's RECORD lists every member with its sha256 and size (PEP 376/427), the library and
# the shipped models among them.
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    record = z.read(f"dimoc-{version}.dist-info/RECORD").decode().splitlines()
    bad = []
    listed = set()
    for line in record:
        name, digest, size = line.rsplit(",", 2)
        listed.add(name)
        if not digest:
            continue
        data = z.read(name)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if digest != want or int(size) != len(data):
            bad.append(name)
models_dir = os.path.join(ROOT, "models")
shipped = sorted(os.path.basename(m)[:-6] for m in glob.glob(os.path.join(models_dir, "*.model")))
wanted = ["dimoc/lib/libdimoc.so.1", "dimoc/__init__.py", "dimoc/share/dimoc/models/lib/compartments.model",
          "dimoc/share/dimoc/templates/fit/lm.h"] + [f"dimoc/share/dimoc/models/{m}.model" for m in shipped]
missing = [w for w in wanted if w not in names]
check("python-wheel-record", not bad and set(names) == listed and not missing,
      f"bad hashes {bad[:3]}, unlisted {sorted(set(names) ^ listed)[:3]}, missing {missing[:3]}")

site = os.path.join(d, "site")
p = subprocess.run([PYTHON, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--no-cache-dir", "--target", site, wheel], capture_output=True, text=True)
check("python-pip-install-target", p.returncode == 0 and os.path.isfile(
    os.path.join(site, "dimoc", "lib", "libdimoc.so.1")), p.stderr[-500:])

# The library exports the API and nothing else, under the API's major version.
lib = os.path.join(site, "dimoc", "lib", "libdimoc.so.1")
syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
exported = [s.split()[-1].split("@")[0] for s in syms.splitlines() if s.split()[1] != "A"]
soname = subprocess.run(["objdump", "-p", lib], capture_output=True, text=True).stdout
check("python-library-exports-api-only",
      exported and all(s.startswith("dimoc_") for s in exported) and "SONAME               libdimoc.so.1" in soname,
      f"{[s for s in exported if not s.startswith('dimoc_')][:5]}")

# ---- what the installed package says, from a fresh interpreter outside the tree ----
bad_models = sorted(glob.glob(os.path.join(ROOT, "tests/compiler/bad/*.model"))) + [
    os.path.join(ROOT, "tests/compiler", f) for f in
    ("multi_errors.model", "multi_syntax_errors.model", "error_in_library.model")]
probe = r'''
import json, os, pathlib, sys
import dimoc
out = {"version": dimoc.__version__, "api": list(dimoc.api_version), "file": dimoc.__file__,
       "data_dir": dimoc.data_dir(), "models": dimoc.models(), "described": {}, "bad": {},
       "same": {}, "generated": {}, "refused": {}}
def desc(m):
    return {"name": m.name, "description": m.description,
            "parameters": [dict(p.__dict__, prior_args=list(p.prior_args)) for p in m.parameters],
            "measures": [x.__dict__ for x in m.measures],
            "voxel_inputs": [x.__dict__ for x in m.voxel_inputs],
            "outputs": [o.__dict__ for o in m.outputs], "code_hash": m.code_hash,
            "source_hash": m.source_hash}
for name in out["models"]:
    m = dimoc.Model(name)
    out["described"][name] = desc(m)
    g = m.generate()
    out["generated"][name] = {"model_h": g.model_h, "meta": g.meta}
    path = m.file
    text = open(path).read()
    by_text = desc(dimoc.Model(text, file_name=path))
    by_pathlib = desc(dimoc.Model(pathlib.Path(path)))
    out["same"][name] = by_text == out["described"][name] == by_pathlib
for path in sys.argv[1:]:
    entry = {}
    text = open(path, encoding="utf-8", errors="surrogateescape").read()
    for how in ("path", "text", "string"):
        try:
            if how == "path":
                dimoc.Model(path)
            elif how == "text":
                dimoc.Model(text, file_name=path)
            elif "import" in text or "\n" not in text:
                continue  # imports are looked for in the working folder; one line is a name
            else:
                dimoc.Model(text)
            entry[how] = None
        except dimoc.ModelError as e:
            entry[how] = {"str": str(e), "diagnostics": [
                [x.file, x.line, x.column, x.severity, x.message] for x in e.diagnostics]}
        except ValueError as e:
            entry[how] = {"refused": str(e)}
    out["bad"][path] = entry
warn = dimoc.Model(sys.argv[1].rsplit("/bad/", 1)[0] + "/warn_unused.model")
out["warnings"] = [[x.file, x.line, x.column, x.severity, x.message] for x in warn.warnings]
def refused(label, fn, kind):
    try:
        fn()
        out["refused"][label] = "accepted"
    except kind as e:
        out["refused"][label] = "ok: " + str(e)
    except Exception as e:
        out["refused"][label] = f"{type(e).__name__}: {e}"
refused("int", lambda: dimoc.Model(42), ValueError)
refused("bytes", lambda: dimoc.Model(b"ball_1_stick"), ValueError)
refused("file_name", lambda: dimoc.Model("model x\n", file_name=3), ValueError)
refused("set_data_dir", lambda: dimoc.set_data_dir(3), ValueError)
refused("unknown", lambda: dimoc.Model("no_such_model"), ValueError)
refused("missing", lambda: dimoc.Model("no/such.model"), FileNotFoundError)
print(json.dumps(out))
'''
env = {k: v for k, v in os.environ.items()
       if not k.startswith("DIMOC_") and k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
env["PYTHONPATH"] = site
outside = os.path.join(d, "elsewhere")
os.makedirs(outside)
p = subprocess.run([PYTHON, "-c", probe] + bad_models, capture_output=True, text=True, env=env,
                   cwd=outside)
check("python-import-installed", p.returncode == 0, p.stderr[-1500:])
if p.returncode != 0:
    finish()
got = json.loads(p.stdout)

check("python-version", got["version"] == dimoc("--version")[1].split()[-1] == version
      and got["api"][0] == 1, f"{got['version']} {got['api']}")
package = os.path.join(site, "dimoc")
check("python-finds-own-data", got["file"].startswith(site)
      and os.path.realpath(got["data_dir"]) == os.path.realpath(os.path.join(package, "share", "dimoc")),
      f"{got['file']} {got['data_dir']}")
listed = [l.split()[0] for l in dimoc("info")[1].splitlines()[1:] if l.startswith("  ")]
check("python-models-list", got["models"] == listed == shipped, f"{got['models']} vs {listed}")

# every shipped model against `dimoc info` and `dimoc check`'s summary
info_bad, check_bad = [], []
for name in shipped:
    ref = parse_info(dimoc("info", name)[1])
    m = got["described"][name]
    params = [{"name": x["name"], "lower_closed": x["lower_closed"], "lower": number(x["lower"]),
               "upper": number(x["upper"]), "upper_closed": x["upper_closed"],
               "init": x["start"] or number(x["init"]),
               "prior": x["prior"] + ("(" + ", ".join("%g" % a for a in x["prior_args"]) + ")"
                                      if x["prior_args"] else ""),
               "periodic": x["periodic"]} for x in m["parameters"]]
    measures = [(x["name"], x["width"], x["source"]) for x in m["measures"]]
    voxels = [(x["name"], x["width"], None if x["default"] is None else "%g" % x["default"])
              for x in m["voxel_inputs"]]
    outputs = [(o["name"], o["kind"]) for o in m["outputs"]]
    mine = {"name": m["name"], "description": m["description"], "parameters": params,
            "measures": measures, "voxels": voxels, "outputs": outputs}
    if mine != ref:
        info_bad.append(f"{name}: {[k for k in ref if ref[k] != mine[k]]}")
    summary = parse_check_summary(dimoc("check", os.path.join(models_dir, name + ".model"))[1])
    mine = {"parameters": [(x["name"], ("[" if x["lower_closed"] else "(") + number(x["lower"]) + ", "
                            + number(x["upper"]) + ("]" if x["upper_closed"] else ")"))
                           for x in m["parameters"]],
            "outputs": outputs, "measures": [(x["name"], x["width"]) for x in m["measures"]],
            "voxels": voxels}
    if mine != summary:
        check_bad.append(f"{name}: {[k for k in summary if summary[k] != mine[k]]}")
check("python-models-match-dimoc-info", not info_bad, "; ".join(info_bad[:4]))
check("python-models-match-dimoc-check", not check_bad, "; ".join(check_bad[:4]))

# the generated code against `dimoc compile`'s files
gen_bad = []
for name in shipped:
    out = os.path.join(d, "compiled", name)
    dimoc("compile", os.path.join(models_dir, name + ".model"), "-o", out)
    for key, file in (("model_h", "model.h"), ("meta", "model.meta")):
        with open(os.path.join(out, file)) as f:
            if f.read() != got["generated"][name][key]:
                gen_bad.append(f"{name}/{file}")
check("python-generate-matches-dimoc-compile", not gen_bad, ", ".join(gen_bad[:5]))

same = [n for n in shipped if not got["same"][n]]
check("python-source-text-path-pathlib-same", not same, ", ".join(same))

# every bad model: the diagnostics are dimoc check's, line for line, and str() is its stderr
diag_bad, str_bad, text_bad, count = [], [], [], 0
for path in bad_models:
    rc, _, err = dimoc("check", path, expect_ok=False)
    ref = parse_diagnostics(err)
    entry = got["bad"][path]
    mine = entry["path"]
    count += 1
    if rc != 1 or mine is None or [tuple(x) for x in mine["diagnostics"]] != ref or not ref:
        diag_bad.append(os.path.basename(path))
    elif mine["str"] != err.rstrip("\n"):
        str_bad.append(os.path.basename(path))
    # from source text named by its path: the same diagnostics; without a name, the same
    # mistakes of the model's own text, in "<string>"; a NUL byte is refused (a C string)
    with open(path, "rb") as f:
        nul = b"\0" in f.read()
    text, string = entry["text"], entry.get("string")
    own = [(l, c, s, msg) for f, l, c, s, msg in ref if f == path]
    if nul:
        ok = text is not None and "NUL" in text.get("refused", "")
    else:
        ok = text is not None and [tuple(x) for x in text.get("diagnostics", [])] == ref
        ok = ok and (string is None or [(l, c, s, msg) for f, l, c, s, msg in map(
            tuple, string.get("diagnostics", [])) if f == "<string>"] == own)
    if not ok:
        text_bad.append(os.path.basename(path))
check("python-diagnostics-match-dimoc-check", not diag_bad and count > 100,
      f"{count} models, differing: {diag_bad[:5]}")
check("python-model-error-str-is-dimoc-check", not str_bad, ", ".join(str_bad[:5]))
check("python-diagnostics-from-source-text", not text_bad, ", ".join(text_bad[:5]))
warn_path = os.path.join(ROOT, "tests/compiler/warn_unused.model")
ref = parse_diagnostics(dimoc("check", warn_path)[2])
check("python-warnings-of-clean-model", [tuple(x) for x in got["warnings"]] == ref and ref,
      f"{got['warnings']} vs {ref}")

wrong = {k: v for k, v in got["refused"].items() if not v.startswith("ok: ")}
check("python-wrong-arguments-refused", not wrong and "spec" in got["refused"]["int"]
      and "path" in got["refused"]["set_data_dir"] and "file_name" in got["refused"]["file_name"],
      f"{wrong or got['refused']}")

finish()
