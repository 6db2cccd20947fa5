"""docs/mrtrix-defaults.md against the programs: every row of its table of defaults (dimoc csd,
response, track --fod, tdi beside MRtrix 3.0.3's dwi2fod, dwi2response, tckgen, tckmap) is
checked against what `dimoc help CMD` and the MRtrix command's `-help` print.

The page is the source of the expected pairs; this test parses both programs' help into options
and their paragraphs and checks each row's quotes (the `backticked` pieces of a cell) there:
on dimoc's side an option line ending in `[default: X]` must be quoted exactly, another option
line or the whole help ((description)) must hold each quote; on MRtrix's side the option's help
paragraph (white space normalised) must hold each quote.  A value neither help prints is
checked where the row says: `source PATH` (dimoc's tree), `script PATH` (the MRtrix installation
under /usr/lib/mrtrix3: for `default=` quotes, the option's own add_argument line), or `run`
(dwi2response's response degree: dwi2response fa is run on MRtrix's small test DWI and its row
of coefficients counted).  A row whose option is `—` asserts the program has no such option.
Every dimoc option of the four commands that prints `[default: ...]` must have a row, and the
table must keep its fixed columns.  About 3 s."""
import os
import re
import shutil
import subprocess

from dmtest import DIMOC, check, finish, workdir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
DOC = os.path.join(ROOT, "docs", "mrtrix-defaults.md")
MRTRIX_SHARE = "/usr/lib/mrtrix3"
COLUMNS = ["dimoc", "option", "default", "from", "MRtrix", "option", "default", "from", "same? why not"]
DIMOC_COMMANDS = ["csd", "response", "track --fod", "tdi"]


def squash(text):
    return " ".join(text.split())


def quotes(cell):
    return re.findall(r"`([^`]+)`", cell)


def table_rows(path):
    """The rows of the page's one table, as lists of cells; the header row checked."""
    rows, header = [], None
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line.startswith("|"):
            if rows or header:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
        elif not set(line) <= set("|- "):
            rows.append(cells)
    return header, rows


def dimoc_help(command):
    """(options {name: (line text, default or None)}, whole help squashed) of `dimoc help CMD`;
    `track --fod` is the FOD part of track's help."""
    words = command.split()
    out = subprocess.run([DIMOC, "help", words[0]], capture_output=True, text=True).stdout
    if command == "track --fod":
        out = out[out.index("usage: dimoc track --fod"):]
    options = {}
    for line in out.splitlines():
        m = re.match(r"^  (--?[\w-]+)\b(.*)$", line)
        if m and m.group(1) not in options:
            d = re.search(r"\[default: (.*)\]$", m.group(2))
            options[m.group(1)] = (squash(m.group(2)), d.group(1) if d else None)
    return options, squash(out)


def mrtrix_help(command):
    """(options {name: paragraph squashed}, whole page squashed) of `COMMAND -help`, the
    terminal's overstrike (bold, underline) removed."""
    out = subprocess.run(command.split() + ["-help"], capture_output=True, text=True)
    text = re.sub(".\x08", "", out.stdout + out.stderr)
    options, name, para = {}, None, []
    for line in text.splitlines():
        m = re.match(r"^  (-\w+)\b", line)
        if m:
            if name:
                options.setdefault(name, squash(" ".join(para)))
            name, para = m.group(1), []
        elif name and (line.startswith("     ") or not line.strip()):
            para.append(line)
        elif name:
            options.setdefault(name, squash(" ".join(para)))
            name, para = None, []
    if name:
        options.setdefault(name, squash(" ".join(para)))
    return options, squash(text)


def mrtrix_name(dimoc_option):
    return "-" + dimoc_option.lstrip("-").replace("-", "_")


def response_degree(d):
    """lmax of dwi2response fa's response (no -lmax) on MRtrix's dwi2fod test data: (number of
    coefficients - 1) x 2."""
    src = os.path.join(ROOT, "tests", "data", "mrtrix_dwi2fod")
    out = os.path.join(d, "fa_response.txt")
    p = subprocess.run(["dwi2response", "fa", os.path.join(src, "dwi.nii.gz"), out, "-fslgrad",
                        os.path.join(src, "dwi.bvecs"), os.path.join(src, "dwi.bvals"), "-mask",
                        os.path.join(src, "mask.nii.gz"), "-number", "20", "-quiet", "-force", "-nthreads", "1",
                        "-scratch", d], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    rows = [l.split() for l in open(out) if l.strip() and not l.startswith("#")]
    return (len(rows[0]) - 1) * 2, f"{len(rows[0])} coefficients"


def check_source(path, quote, option):
    """A quote in a file; a `default=` quote on the add_argument line of `option`."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        return False, str(e)
    if quote.startswith("default=") and option not in ("—", "(description)"):
        lines = [l for l in text.splitlines() if f"'{option}'" in l]
        return any(quote in l for l in lines), f"{option}'s line in {path}: {squash(' '.join(lines))[:200]}"
    return quote in text or squash(quote) in squash(text), f"not in {path}"


def main():
    if not shutil.which("dwi2fod"):
        check("mrtrix-available", False, "MRtrix3 not found (scripts/install-deps.sh)")
        finish()
    d = workdir("mrtrix_defaults")
    header, rows = table_rows(DOC)
    check("table-columns", header == COLUMNS, f"{header}")
    if header != COLUMNS:
        finish()
    dimoc_cache, mrtrix_cache, degree = {}, {}, None
    covered = set()
    for n, row in enumerate(rows, 1):
        if len(row) != len(COLUMNS):
            check(f"row-{n}", False, f"{len(row)} cells: {row}")
            continue
        cmd, opt, value, where, mcmd, mopt, mvalue, mwhere, _ = row
        opt, mopt = (quotes(opt) or [opt])[0], (quotes(mopt) or [mopt])[0]
        name = f"{cmd.replace(' ', '')}{opt}-vs-{mcmd.replace(' ', '_')}{mopt}"
        # dimoc's side
        if cmd not in dimoc_cache:
            dimoc_cache[cmd] = dimoc_help(cmd)
        options, whole = dimoc_cache[cmd]
        problems = []
        if where == "help":
            if opt == "(description)":
                problems += [f"{q!r} not in the help" for q in quotes(value) if squash(q) not in whole]
            elif opt not in options:
                problems.append(f"dimoc help {cmd} has no {opt}")
            else:
                line, default = options[opt]
                covered.add((cmd, opt))
                if default is not None:
                    if quotes(value) != [default]:
                        problems.append(f"dimoc prints [default: {default}], the page {quotes(value)}")
                else:
                    problems += [f"{q!r} not in {opt}'s line" for q in quotes(value) if squash(q) not in line]
        elif where.startswith("source "):
            for q in quotes(value):
                ok, why = check_source(os.path.join(ROOT, where.split(" ", 1)[1]), q, opt)
                if not ok:
                    problems.append(f"{q!r}: {why}")
        else:
            problems.append(f"dimoc's 'from' must be help or source PATH, not {where!r}")
        if not quotes(value):
            problems.append("no quoted dimoc value")
        # MRtrix's side
        if mcmd not in mrtrix_cache:
            mrtrix_cache[mcmd] = mrtrix_help(mcmd)
        moptions, mwhole = mrtrix_cache[mcmd]
        if not moptions:
            problems.append(f"`{mcmd} -help` printed no options")
        if mopt == "—":
            absent = mrtrix_name(opt)
            if opt.startswith("-") and absent in moptions:
                problems.append(f"{mcmd} has {absent}")
        elif mwhere == "help":
            if mopt not in moptions:
                problems.append(f"{mcmd} -help has no {mopt}")
            else:
                problems += [f"{q!r} not in {mcmd} {mopt}'s help: {moptions[mopt][:200]}"
                             for q in quotes(mvalue) if squash(q) not in moptions[mopt]]
        elif mwhere.startswith("script "):
            if mopt not in moptions:
                problems.append(f"{mcmd} -help has no {mopt}")
            for q in quotes(mvalue):
                ok, why = check_source(os.path.join(MRTRIX_SHARE, mwhere.split(" ", 1)[1]), q, mopt)
                if not ok:
                    problems.append(f"{q!r}: {why}")
        elif mwhere == "run" and mcmd.startswith("dwi2response") and mopt == "-lmax":
            if degree is None:
                degree = response_degree(d)
            if [str(degree[0])] != quotes(mvalue):
                problems.append(f"dwi2response fa's response has degree {degree[0]} ({degree[1]}), "
                                f"the page {quotes(mvalue)}")
        else:
            problems.append(f"MRtrix's 'from' must be help, script PATH or run (-lmax), not {mwhere!r}")
        if mopt != "—" and not quotes(mvalue):
            problems.append("no quoted MRtrix value")
        check(name, not problems, "; ".join(problems) if problems else
              f"{' / '.join(quotes(value))}  vs  {' / '.join(quotes(mvalue)) or mvalue}")
    # every printed dimoc default has a row
    for cmd in DIMOC_COMMANDS:
        if cmd not in dimoc_cache:
            dimoc_cache[cmd] = dimoc_help(cmd)
        missing = [o for o, (_, dflt) in dimoc_cache[cmd][0].items() if dflt is not None and (cmd, o) not in covered]
        check(f"every-default-of-{cmd.replace(' ', '')}-has-a-row", not missing, f"missing: {missing}")
    print(f"     {len(rows)} rows checked")
    finish()


if __name__ == "__main__":
    main()
