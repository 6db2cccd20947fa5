"""The C API as a program outside the tree uses it: `make install PREFIX=<tmp>` installs
libdimoc.so (its SONAME and links), dimoc.h and dimoc.pc; examples/c_api/model_info.c is built
with its Makefile through pkg-config against that tree only, and run with nothing set (the
library finds the installed models beside itself).  Its description of every shipped model is
compared with `dimoc info MODEL`, its diagnostics of a bad model with `dimoc check`'s."""
import glob
import os
import subprocess

from apicheck import parse_diagnostics, parse_info
from dmtest import check, dimoc, finish, workdir

ROOT = os.environ.get("ROOT", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
d = workdir("c_api")
prefix = os.path.join(d, "prefix")
p = subprocess.run(["make", "-s", "-C", ROOT, "install", f"PREFIX={prefix}"], capture_output=True,
                   text=True)
with open(os.path.join(ROOT, "include", "dimoc.h")) as f:
    header = f.read()
major = header.split("#define DIMOC_API_VERSION_MAJOR ")[1].split()[0]
minor = header.split("#define DIMOC_API_VERSION_MINOR ")[1].split()[0]
libdir = os.path.join(prefix, "lib")
links = {n: os.readlink(os.path.join(libdir, n)) for n in (f"libdimoc.so.{major}", "libdimoc.so")
         if os.path.islink(os.path.join(libdir, n))}
check("c-api-installed", p.returncode == 0
      and os.path.isfile(os.path.join(libdir, f"libdimoc.so.{major}.{minor}"))
      and links == {f"libdimoc.so.{major}": f"libdimoc.so.{major}.{minor}",
                    "libdimoc.so": f"libdimoc.so.{major}"}
      and os.path.isfile(os.path.join(prefix, "include", "dimoc.h")),
      f"rc {p.returncode} {p.stderr[-300:]} links {links}")

env = {k: v for k, v in os.environ.items() if not k.startswith("DIMOC_")}
env["PKG_CONFIG_PATH"] = os.path.join(libdir, "pkgconfig")
with open(os.path.join(ROOT, "VERSION")) as f:
    version = f.read().strip()
pc = {flag: subprocess.run(["pkg-config", flag, "dimoc"], env=env, capture_output=True,
                           text=True).stdout.strip() for flag in ("--modversion", "--cflags", "--libs")}
check("c-api-pkg-config", pc["--modversion"] == version and pc["--cflags"] == f"-I{prefix}/include"
      and pc["--libs"] == f"-L{libdir} -ldimoc", f"{pc}")

# the example, built by its Makefile against the installed tree (not the source tree's build/)
p = subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "examples", "c_api"), f"OUT={d}",
                    f"PKG_CONFIG_PATH={env['PKG_CONFIG_PATH']}"], capture_output=True, text=True,
                   env=env)
exe = os.path.join(d, "model_info")
ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout if os.path.exists(exe) else ""
check("c-api-example-builds", p.returncode == 0 and os.path.realpath(
    os.path.join(libdir, f"libdimoc.so.{major}")) in [os.path.realpath(w) for w in ldd.split()
                                                       if w.startswith("/")],
      f"{p.stderr[-500:]} {ldd}")
if not os.path.exists(exe):
    finish()

outside = os.path.join(d, "elsewhere")
os.makedirs(outside)


def run(*args):
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, cwd=outside)


# every shipped model: the example's lines against `dimoc info`'s table
shipped = sorted(os.path.basename(m)[:-6] for m in glob.glob(os.path.join(ROOT, "models/*.model")))
differ = []
for name in shipped:
    r = run(name)
    ref = parse_info(dimoc("info", name)[1])
    want = [f"model {ref['name']}: {ref['description']}"]
    for x in ref["parameters"]:
        want.append(f"parameter {x['name']} {'[' if x['lower_closed'] else '('}{x['lower']}, "
                    f"{x['upper']}{']' if x['upper_closed'] else ')'} init {x['init']} prior "
                    f"{x['prior'].split('(')[0]}" + (" periodic" if x["periodic"] else ""))
    want += [f"measure {n} width {w} from {s}" for n, w, s in ref["measures"]]
    want += [f"voxel {n} width {w}" + (f" default {v}" if v else "") for n, w, v in ref["voxels"]]
    want += [f"output {n} {k} width " for n, k in ref["outputs"]]
    got = r.stdout.splitlines()
    # an output's width is the example's own: the table has none; the rest must match whole
    got = [g.rsplit(" ", 1)[0] + " " if g.startswith("output ") else g for g in got]
    if r.returncode != 0 or got != want:
        differ.append(f"{name}: {r.stderr.strip()[:200]} {[g for g in got if g not in want][:2]}"
                      f" vs {[w for w in want if w not in got][:2]}")
check("c-api-example-matches-dimoc-info", not differ and len(shipped) > 10, "; ".join(differ[:3]))

# a model with mistakes: the diagnostics, and their printed form, are dimoc check's
bad = os.path.join(ROOT, "tests/compiler/multi_errors.model")
r = run(bad)
rc, _, err = dimoc("check", bad, expect_ok=False)
ref = parse_diagnostics(err)
check("c-api-example-diagnostics", r.returncode == 1 and len(ref) == 4
      and parse_diagnostics(r.stderr) == ref
      and r.stderr.splitlines()[:-1] == err.splitlines()[:-1], r.stderr[-600:])
r = run("no_such_model")
check("c-api-example-unknown-model", r.returncode == 1 and "DIMOC_E_NOT_FOUND" in r.stderr
      and "unknown model 'no_such_model'" in r.stderr, r.stderr)
finish()
