"""What the tests of the C API and the Python package compare against: the program's own
printouts, read back.  `dimoc info MODEL` (the description), `dimoc check FILE` (the summary of
the checked tree, and the diagnostics of a bad model)."""
import re

_PARAM = re.compile(r"^  (\S+) +([\[(])([^,]+), ([^\])]+)([\])]) +(\S+) +(.*?) *$")
_DIAG = re.compile(r"^(.*?):(\d+):(\d+): (error|warning|note): (.*)$")


def parse_info(text):
    """`dimoc info MODEL`'s printout: {name, description, parameters: [dict], measures:
    [(name, width, source)], voxels: [(name, width, default or None)], outputs: [(name, kind)]}."""
    lines = text.splitlines()
    name, description = lines[0].split(": ", 1)
    info = {"name": name, "description": description, "parameters": [], "measures": [],
            "voxels": [], "outputs": []}
    section = None
    for line in lines[1:]:
        if line.startswith("parameters ("):
            section = "parameters"
        elif line.startswith("per-measurement inputs"):
            section = "measures"
        elif line.startswith("per-voxel inputs"):
            section = "voxels"
        elif line.startswith("outputs: one map per parameter"):
            info["outputs"] = re.findall(r", (\S+) \((\w+)\)", line)
            section = None
        elif section == "parameters" and line.startswith("  ") and not line.startswith("  name "):
            m = _PARAM.match(line)
            rest = m.group(7)
            periodic = rest.endswith("periodic")
            prior = rest[:-len("periodic")].strip() if periodic else rest.strip()
            info["parameters"].append({
                "name": m.group(1), "lower_closed": m.group(2) == "[", "lower": m.group(3),
                "upper": m.group(4), "upper_closed": m.group(5) == "]", "init": m.group(6),
                "prior": prior, "periodic": periodic})
        elif section == "measures" and line.startswith("  "):
            m = re.match(r"^  (\S+) +width (\d+), from (\S+)", line)
            source = {"--bvals": "bvals", "--bvecs": "bvecs", "--scheme": "scheme"}.get(
                m.group(3), "file")
            info["measures"].append((m.group(1), int(m.group(2)), source))
        elif section == "voxels" and line.startswith("  "):
            m = re.match(r"^  (\S+) +width (\d+)(?:, default (\S+))?", line)
            info["voxels"].append((m.group(1), int(m.group(2)), m.group(3)))
    return info


def parse_check_summary(text):
    """`dimoc check`'s summary of a clean model: {parameters: [(name, bounds text)], outputs:
    [(name, kind)], measures: [(name, width)], voxels: [(name, width, default or None)]}."""
    out = {"parameters": [], "outputs": [], "measures": [], "voxels": []}
    section = None
    for line in text.splitlines():
        if not line.startswith("  "):
            head = line.split(" ", 1)[0]
            section = {"parameters": "parameters", "outputs": "outputs", "measures": "measures",
                       "voxel": "voxels"}.get(head)
            continue
        if section == "parameters" and not line.startswith("  name ") and "(*" not in line:
            m = re.match(r"^  (\S+) +([\[(][^\])]*[\])])", line)
            out["parameters"].append((m.group(1), m.group(2)))
        elif section == "outputs":
            m = re.match(r"^  (\S+) +(\w+) +column", line)
            out["outputs"].append((m.group(1), m.group(2)))
        elif section == "measures":
            m = re.match(r"^  (\S+) +width (\d+)", line)
            out["measures"].append((m.group(1), int(m.group(2))))
        elif section == "voxels":
            m = re.match(r"^  (\S+) +width (\d+) .*?(?:default (\S+))?$", line)
            out["voxels"].append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def parse_diagnostics(stderr):
    """`dimoc check`'s diagnostics on stderr: [(file, line, column, severity, message)], the
    lines of source and carets skipped, the count line left out."""
    found = []
    for line in stderr.splitlines():
        m = _DIAG.match(line)
        if m:
            found.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5)))
        elif not line.startswith("    ") and ": error: " in line:  # about the file as a whole
            file, message = line.split(": error: ", 1)
            found.append((file, 0, 0, "error", message))
        elif line.endswith(("too many errors: stopped after the first 20",)):
            file, message = line.split(": ", 1)
            found.append((file, 0, 0, "error", message))
    return found


def number(x):
    """A float as dimoc prints it (%g, inf)."""
    if x == float("inf"):
        return "inf"
    if x == float("-inf"):
        return "-inf"
    return "%g" % x
