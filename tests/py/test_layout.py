"""The architecture rules of docs/internals.md, checked on the sources as they are:

- every #include between folders follows the dependency table below (one direction only:
  cli -> runtime wings -> util/io; the compiler and the templates depend on nothing of the
  runtime, and the templates (the contract with generated code), a folder per engine, on
  nothing but templates/maths);
- no circle of files that use each other: none by their #include lines, a source and its
  header taken as one file (a.c includes b.h, b.c includes a.h), and none by the names they
  take from each other when linked (a.o calls what b.o defines and b.o what a.o defines, read
  from the built objects: a circle through a header that both include, cli.h, check.h, is
  found there); none between folders;
- no folder of sources holds more than 20 files;
- no library archive in build/ defines main().

An include is resolved as the compiler resolves it: beside the including file first, then
under include/, compiler/, runtime/, templates/ (the -I folders of the Makefile)."""
import os
import re
import subprocess

from dmtest import check, finish

ROOT = os.environ.get("ROOT", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
TOP_DIRS = ["cli", "compiler", "runtime", "templates", "include"]
INCLUDE_DIRS = ["include", "compiler", "runtime", "templates"]
EXT = (".c", ".h", ".cu", ".l", ".y")

# Which folders each folder may include from (besides itself).  docs/internals.md explains them.
ALLOWED = {
    # the templates, a folder per engine; the maths they share (mathlib.h, philox.h) below all
    "templates/maths": set(),
    "templates/fit": {"templates/maths"},
    "templates/track": {"templates/maths"},
    "templates/csd": set(),
    "templates/fodtrack": {"templates/maths"},
    "templates/commit": set(),
    "compiler": set(),
    # the public C API's header (dimoc.h): includes nothing of the tree
    "include": set(),
    # the built-ins' values (mathlib.h, folded as the generated code computes them) and the
    # contract with generated code (fit/model_api.h)
    "compiler/front": {"compiler", "templates/maths", "templates/fit"},
    "compiler/back": {"compiler", "compiler/front", "templates/maths", "templates/fit"},
    "runtime/util": set(),
    "runtime/io": {"runtime/util"},
    "runtime/tractogram": {"runtime/io", "runtime/util"},
    # (runtime/io for huge pages under pinned host memory, gpu_stage.h)
    "runtime/gpu": {"runtime/util", "runtime/io", "compiler"},
    "runtime/model": {"runtime/util", "runtime/io", "compiler", "templates/fit"},
    "runtime/fit": {"runtime/cluster", "runtime/model", "runtime/gpu", "runtime/dti", "runtime/io", "runtime/util",
                    "runtime/vecmath", "compiler", "templates/fit"},
    "runtime/track": {"runtime/tractogram", "runtime/cluster", "runtime/gpu", "runtime/io", "runtime/util", "templates/track",
                      "templates/maths"},
    "runtime/dti": {"runtime/io", "runtime/util", "runtime/vecmath"},
    # elementwise log, exp, sin and cos over arrays (libmvec's), the same bits in every build
    "runtime/vecmath": set(),
    "runtime/simulate": {"runtime/fit", "runtime/model", "runtime/io", "runtime/util",
                         "templates/maths"},
    "runtime/sphere": set(),
    # geometry of streamlines, no files: clustering (COMMIT's blur_clust_thr)
    "runtime/streamline": {"runtime/util"},
    "runtime/csd": {"runtime/cluster", "runtime/sphere", "runtime/gpu", "runtime/dti", "runtime/io", "runtime/util",
                    "templates/csd"},
    # the commands' file side of csd/ (whose engines work in memory): `dimoc csd`, `dimoc
    # response` and `dimoc peaks` read their files, run the engines and write the maps
    "runtime/csd_files": {"runtime/csd", "runtime/sphere", "runtime/cluster", "runtime/io",
                          "runtime/util"},
    "runtime/render": {"runtime/sphere", "runtime/io", "runtime/util"},
    "runtime/maps": {"runtime/io", "runtime/util"},
    "runtime/fodtrack": {"runtime/tractogram", "runtime/cluster", "runtime/io", "runtime/util", "runtime/gpu", "runtime/sphere",
                         "templates/maths", "templates/fodtrack"},
    # COMMIT's engine: the dictionary, the responses, the operator and its solve
    "runtime/commit": {"runtime/tractogram", "runtime/io", "runtime/util", "runtime/gpu", "templates/maths", "templates/commit"},
    # `dimoc commit`'s run over it: reads a DWI as CSD does (csd/dwi.h), fits tensors where no
    # peaks are given, clusters the streamlines (--blur-clust-thr), saves a part's dictionary
    "runtime/commit_run": {"runtime/tractogram", "runtime/commit", "runtime/cluster", "runtime/csd", "runtime/dti", "runtime/io",
                           "runtime/util", "runtime/gpu", "runtime/streamline"},
    # a brain mask from the DWI itself (dwi2mask): reads the DWI as CSD does (csd/dwi.h)
    "runtime/mask": {"runtime/csd", "runtime/io", "runtime/util"},
    # a job's parts (--part K/N, the manifest the wings write) and joining them: NIfTI bytes,
    # .tck files; a pipeline on SLURM (job scripts, sbatch/squeue/sacct as child processes)
    "runtime/cluster": {"runtime/tractogram", "runtime/io", "runtime/util"},
    # `dimoc bids`: a BIDS dataset's runs through a pipeline in one process (its stages run
    # through a function cli/ hands in), their derivatives and pictures, masks made as dimoc
    # mask makes them, the shells of a run (csd/dwi.h), a study's job array on SLURM, the next
    # run's signals gathered for its fit while this one fits (fit/fit_inputs.h)
    "runtime/study": {"runtime/cluster", "runtime/csd", "runtime/fit", "runtime/io", "runtime/mask",
                      "runtime/render", "runtime/util"},
    # the public C API over the compiler and the runtime (libdimoc.so; cli calls it through
    # include/dimoc.h, and nothing includes runtime/api); the engines join as the API grows
    "runtime/api": {"include", "compiler", "runtime/model", "runtime/fit", "runtime/simulate",
                    "runtime/dti", "runtime/csd", "runtime/sphere", "runtime/fodtrack",
                    "runtime/tractogram", "runtime/commit_run", "runtime/gpu", "runtime/io",
                    "runtime/util"},
    "cli": {"include", "runtime/study", "runtime/tractogram", "runtime/cluster", "runtime/util", "runtime/io", "runtime/gpu", "runtime/model", "runtime/fit",
            "runtime/track", "runtime/dti", "runtime/simulate", "runtime/render",
            "runtime/maps", "runtime/sphere", "runtime/csd", "runtime/fodtrack", "runtime/commit",
            "runtime/commit_run", "runtime/mask", "compiler",
            "runtime/csd_files"},
}


def source_files():
    """Every folder under TOP_DIRS that holds sources, and the sources."""
    dirs, files = [], []
    for top in TOP_DIRS:
        for d, subdirs, names in os.walk(os.path.join(ROOT, top)):
            subdirs.sort()
            here = sorted(n for n in names if n.endswith(EXT))
            if here:
                rel = os.path.relpath(d, ROOT)
                dirs.append(rel)
                files += [os.path.join(rel, n) for n in here]
    return dirs, files


def resolve(including, target):
    here = os.path.join(os.path.dirname(including), target)
    if os.path.exists(os.path.join(ROOT, here)):
        return os.path.normpath(here)
    for d in INCLUDE_DIRS:
        p = os.path.join(d, target)
        if os.path.exists(os.path.join(ROOT, p)):
            return os.path.normpath(p)
    return None  # a system header, or one made by the build (parser.h)


def includes(path):
    with open(os.path.join(ROOT, path), errors="replace") as f:
        text = f.read()
    return re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M)


def find_cycle(graph):
    """One cycle of a directed graph (dict node -> set of nodes) as a list, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def room(path):
    """A source and its header are one file of the design: cli/args.c and cli/args.h."""
    return os.path.splitext(path)[0]


def link_graph(objdir):
    """Which objects use which: a.o -> b.o when a.o takes a name that b.o defines (nm), as
    sources (compiler/front/parser.y for build/parser.o).  None when nothing is built."""
    objects = {}
    for top in ("cli", "compiler", "runtime"):
        for d, _, names in os.walk(os.path.join(objdir, top)):
            for n in names:
                if n.endswith(".o"):
                    o = os.path.join(d, n)
                    objects[o] = os.path.relpath(o, objdir)[:-2] + ".c"
    for stem, source in (("parser", "compiler/front/parser.y"), ("lexer", "compiler/front/lexer.l")):
        objects[os.path.join(objdir, stem + ".o")] = source
    # an object left behind by a source since moved or removed is no file of the design
    objects = {o: s for o, s in objects.items()
               if os.path.exists(o) and os.path.exists(os.path.join(ROOT, s))}
    if not objects:
        return None
    defined, used = {}, {}
    for o, source in objects.items():
        out = subprocess.run(["nm", o], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                used.setdefault(source, set()).add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRCVW":
                defined.setdefault(parts[2], set()).add(source)
    graph = {}
    for source, names in used.items():
        for name in names:
            for other in defined.get(name, ()):
                if other != source:
                    graph.setdefault(source, set()).add(other)
    return graph


dirs, files = source_files()
file_graph, folder_graph, bad_edges, unknown_dirs = {}, {}, [], set()
for f in files:
    src_dir = os.path.dirname(f)
    if src_dir not in ALLOWED:
        unknown_dirs.add(src_dir)
    for inc in includes(f):
        target = resolve(f, inc)
        if target is None:
            continue
        if room(target) != room(f):
            file_graph.setdefault(room(f), set()).add(room(target))
        dst_dir = os.path.dirname(target)
        if dst_dir == src_dir:
            continue
        folder_graph.setdefault(src_dir, set()).add(dst_dir)
        if dst_dir not in ALLOWED.get(src_dir, set()):
            bad_edges.append(f"{f} -> {target}")

check("layout-folders-known", not unknown_dirs,
      "folders missing from the dependency table: " + ", ".join(sorted(unknown_dirs)))
check("layout-dependencies-one-way", not bad_edges,
      f"{len(bad_edges)} includes against the rules, e.g. " + "; ".join(bad_edges[:5]))
cycle = find_cycle(file_graph)
check("layout-no-file-include-cycle", cycle is None, " -> ".join(cycle or []))
cycle = find_cycle(folder_graph)
check("layout-no-folder-cycle", cycle is None, " -> ".join(cycle or []))

crowded = [f"{d} ({n})" for d in dirs
           if (n := len([x for x in os.listdir(os.path.join(ROOT, d)) if x.endswith(EXT)])) > 20]
check("layout-folders-at-most-20-files", not crowded, ", ".join(crowded))

# The library archives: none may hold a main() (the program's lives in cli/main.c).
libdir = os.path.join(ROOT, os.environ.get("TEST_LIBDIR", "build"))
archives = [os.path.join(libdir, a) for a in ("libdimoc-runtime.a", "libdimoc-compiler.a")]
present = [a for a in archives if os.path.exists(a)]
check("layout-archives-built", len(present) == len(archives), f"found {present}")
with_main = []
for a in present:
    out = subprocess.run(["nm", "--defined-only", a], capture_output=True, text=True).stdout
    if re.search(r"^[0-9a-f]+ T main$", out, re.M):
        with_main.append(os.path.basename(a))
check("layout-no-main-in-libraries", not with_main, "main() in " + ", ".join(with_main))

# The circles that the includes cannot show: two files that call each other through a header
# both include (check.h), or a command table that reaches the option parser that looks a
# command up in it (cli.h).
links = link_graph(libdir)
check("layout-objects-built", links is not None, f"the objects under {libdir}")
cycle = find_cycle(links or {})
check("layout-no-file-link-cycle", cycle is None, " -> ".join(cycle or []))

finish()
