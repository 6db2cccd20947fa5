"""The peers' reference cache (tests/py/peercache.py), on a stand-in peer that counts its runs:
a first call computes, a second with the same inputs does not; a changed input file, a changed
version or a changed argument computes again; an entry whose file was altered, or cut short, or
whose manifest is missing is detected and computed again, never trusted; a command whose outputs
are files gets them back at their paths, with its exit status; a failed command is not kept."""
import os
import sys

from dmtest import check, finish, workdir

d = workdir("peercache")
os.environ["DIMOC_PEER_CACHE"] = os.path.join(d, "cache")
import peercache  # noqa: E402  (reads DIMOC_PEER_CACHE when imported)

runs = []


def compute(folder, value):
    runs.append(value)
    with open(os.path.join(folder, "out.txt"), "w") as f:
        f.write(f"{value} {open(inp).read()}")
    return {"value": value}


def call(value="a", version="1.0"):
    return peercache.cached_folder("standin", {"peer": version}, {"arg": value},
                                   lambda folder: compute(folder, value), [inp])


inp = os.path.join(d, "input.txt")
open(inp, "w").write("first")
entry, meta = call()
check("miss-computes", len(runs) == 1 and meta == {"value": "a"}
      and open(os.path.join(entry, "out.txt")).read() == "a first", f"{len(runs)} runs")
entry2, _ = call()
check("hit-does-not-compute", len(runs) == 1 and entry2 == entry, f"{len(runs)} runs")

other = os.path.join(d, "elsewhere.txt")  # the same content under another name: a hit
open(other, "w").write("first")
inp_saved, inp = inp, other
call()
check("inputs-by-content-not-path", len(runs) == 1, f"{len(runs)} runs")
inp = inp_saved

open(inp, "w").write("second")
e3, _ = call()
check("changed-input-computes", len(runs) == 2 and e3 != entry
      and open(os.path.join(e3, "out.txt")).read() == "a second", f"{len(runs)} runs")
call(version="2.0")
check("changed-version-computes", len(runs) == 3, f"{len(runs)} runs")
call(value="b")
check("changed-argument-computes", len(runs) == 4, f"{len(runs)} runs")

# Corruption: an altered byte, a truncated file, a lost manifest.
for name, spoil in [("altered", lambda e: open(os.path.join(e, "out.txt"), "a").write("x")),
                    ("truncated", lambda e: open(os.path.join(e, "out.txt"), "w").close()),
                    ("manifest-lost", lambda e: os.remove(os.path.join(e, peercache.MANIFEST)))]:
    before = len(runs)
    spoil(e3)
    e4, _ = call()
    check(f"corrupt-entry-{name}-recomputed", len(runs) == before + 1 and e4 == e3
          and open(os.path.join(e4, "out.txt")).read() == "a second", f"{len(runs) - before} runs")

# A command line: outputs restored to their paths, stdout and exit status kept; failures not kept.
tool = os.path.join(d, "tool.py")
count = os.path.join(d, "count")
open(tool, "w").write("import sys\n"
                      f"open({count!r}, 'a').write('.')\n"
                      "src, dst = sys.argv[1:3]\n"
                      "open(dst, 'w').write(open(src).read().upper())\n"
                      "print('done')\n")
out1 = os.path.join(d, "o1", "up.txt")
os.makedirs(os.path.dirname(out1))
rc, out, _ = peercache.run_command([sys.executable, tool, inp, out1], peer="standin", version="1")
out2 = os.path.join(d, "o2", "up.txt")
os.makedirs(os.path.dirname(out2))
rc2, outb, _ = peercache.run_command([sys.executable, tool, inp, out2], peer="standin", version="1")
check("command-output-restored", rc == rc2 == 0 and out == outb == "done\n"
      and open(out2).read() == "SECOND" and open(count).read() == ".",
      f"rc {rc}, {rc2}; ran {len(open(count).read())} times")
missing = os.path.join(d, "missing.txt")
rc3, _, err = peercache.run_command([sys.executable, tool, missing + "x", os.path.join(d, "o2", "z")],
                                    peer="standin", version="1")
check("failed-command-not-cached", rc3 != 0 and not os.path.exists(os.path.join(d, "o2", "z"))
      and not any(f.startswith(".") for f in os.listdir(os.path.join(peercache.ROOT, "standin"))),
      f"rc {rc3}")
finish()
