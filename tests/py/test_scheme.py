"""Measures from an acquisition scheme's named columns (`measure NAME = scheme COLUMN`,
`--scheme FILE`): a PGSE model with T2 decay whose b comes from G, Delta and delta
and whose echo time comes from the scheme simulates the numpy formula, gives the same signal
with a Camino STEJSKALTANNER scheme, a header scheme (other order, commas, an extra column) and
--measure files, fits back the truth, and reports a missing --scheme, a missing column or a
wrong row count as one line naming the model's file:line:col or the scheme file."""
import os

import numpy as np

from dmtest import check, dimoc, finish, load, workdir

GAMMA = 2.6752218744e8  # rad / (s T)
BODY = """param S0 in (0, inf) init b0
param D  in (0, 5e-9) init 1e-9     # m^2/s
param T2 in (0.01, 0.5) init 0.1    # s
let gamma = 2.6752218744e8
signal S0 * exp(-(gamma * G * delta)^2 * (Delta - delta / 3) * D) * exp(-TE / T2)
"""
FROM_SCHEME = """model pgse_t2 "PGSE with T2 decay, from a scheme"
measure G = scheme
measure Delta = scheme
measure small_delta = scheme delta
measure TE = scheme
let delta = small_delta
""" + BODY
FROM_FILES = """model pgse_t2_files "PGSE with T2 decay, from --measure files"
measure G
measure Delta
measure delta
measure TE
""" + BODY


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


d = workdir("scheme")
m_scheme = write(os.path.join(d, "pgse_t2.model"), FROM_SCHEME)
m_files = write(os.path.join(d, "pgse_t2_files.model"), FROM_FILES)

# 3 echo times x 2 pulse separations x 6 gradient strengths; SI units.
TE, Delta, G = np.meshgrid([0.06, 0.09, 0.12], [0.025, 0.04], [0, 0.015, 0.03, 0.045, 0.06, 0.075],
                           indexing="ij")
TE, Delta, G = TE.ravel(), Delta.ravel(), G.ravel()
delta = np.full(TE.size, 0.01)
rng = np.random.default_rng(3)
g = rng.normal(size=(TE.size, 3))
g /= np.linalg.norm(g, axis=1)[:, None]
M = TE.size

camino = os.path.join(d, "protocol.scheme")
with open(camino, "w") as f:
    f.write("# a Camino scheme\nVERSION: STEJSKALTANNER\n")
    for j in range(M):
        f.write(" ".join(repr(float(x)) for x in (*g[j], G[j], Delta[j], delta[j], TE[j])) + "\n")
header = os.path.join(d, "protocol.txt")
b_smm = (GAMMA * G * delta) ** 2 * (Delta - delta / 3) * 1e-6
with open(header, "w") as f:
    f.write("#TE,delta,b,Delta,G,gx,gy,gz\n")
    for j in range(M):
        f.write(",".join(repr(float(x)) for x in (TE[j], delta[j], b_smm[j], Delta[j], G[j],
                                                 *g[j])) + "\n")
files = []
for name, values in (("G", G), ("Delta", Delta), ("delta", delta), ("TE", TE)):
    np.savetxt(os.path.join(d, name + ".txt"), values, fmt="%.17g")
    files += ["--measure", f"{name}={os.path.join(d, name + '.txt')}"]

params = "S0=1000,D=1.7e-9,T2=0.08"
dimoc("simulate", m_scheme, "--scheme", camino, "--params", params, "--voxels", 4,
      "--out", f"{d}/camino.nii.gz")
dimoc("simulate", m_scheme, "--scheme", header, "--params", params, "--voxels", 4,
      "--out", f"{d}/header.nii.gz")
dimoc("simulate", m_files, *files, "--params", params, "--voxels", 4, "--out", f"{d}/files.nii.gz")
yc, yh, yf = (load(f"{d}/{k}.nii.gz") for k in ("camino", "header", "files"))
check("camino-equals-header", np.array_equal(yc, yh), f"max |diff| {np.max(np.abs(yc - yh)):.3g}")
check("scheme-equals-measure-files", np.array_equal(yc, yf),
      f"max |diff| {np.max(np.abs(yc - yf)):.3g}")
expected = 1000 * np.exp(-(GAMMA * G * delta) ** 2 * (Delta - delta / 3) * 1.7e-9) * np.exp(-TE / 0.08)
err = np.max(np.abs(yc[0, 0, 0, :] / expected - 1))
check("scheme-signal-matches-numpy", err < 1e-6, f"max relative error {err:.2e}")

# Noise-free fits from either scheme: the truth, and the same maps.
for name, path in (("camino", camino), ("header", header)):
    dimoc("fit", m_scheme, "--data", f"{d}/camino.nii.gz", "--scheme", path, "--out-type",
          "float64", "--out", f"{d}/fit_{name}", "--quiet")
for k, truth in (("S0", 1000), ("D", 1.7e-9), ("T2", 0.08)):
    a, b = load(f"{d}/fit_camino/{k}.nii.gz"), load(f"{d}/fit_header/{k}.nii.gz")
    check(f"fit-recovers-{k}", np.max(np.abs(a / truth - 1)) < 1e-6,
          f"max relative error {np.max(np.abs(a / truth - 1)):.2e}")
    check(f"fit-camino-equals-header-{k}", np.array_equal(a, b))

# Mistakes: one line, non-zero exit, no output folder.
def fails(name, args, *fragments):
    rc, _, err = dimoc(*args, expect_ok=False)
    lines = [ln for ln in err.strip().splitlines() if ln]
    ok = rc != 0 and len(lines) == 1 and all(f in lines[0] for f in fragments)
    check(name, ok and not os.path.exists(f"{d}/bad"), f"rc {rc}: {err.strip()}")


fit = ["fit", m_scheme, "--data", f"{d}/camino.nii.gz", "--out", f"{d}/bad", "--quiet"]
fails("no-scheme-given", fit, f"{m_scheme}:2:13:", "measure 'G' reads column 'G' of a scheme file",
      "--scheme")
no_te = write(os.path.join(d, "no_te.txt"), "# gx gy gz G Delta delta\n"
              + "".join(f"{g[j][0]} {g[j][1]} {g[j][2]} {G[j]} {Delta[j]} {delta[j]}\n"
                        for j in range(M)))
fails("scheme-lacks-column", fit + ["--scheme", no_te], f"{m_scheme}:5:14:",
      f"the scheme file '{no_te}' has no column 'TE' (it has: gx gy gz G Delta delta)")
short = write(os.path.join(d, "short.txt"), "".join(open(header).readlines()[:-1]))
fails("scheme-rows-differ", fit + ["--scheme", short], short, f"{M - 1} rows", f"{M} volumes")
fails("simulate-no-scheme", ["simulate", m_scheme, "--bvals", os.path.join(d, "TE.txt"),
                             "--params", params, "--out", f"{d}/bad"], f"{m_scheme}:2:13:")
finish()
