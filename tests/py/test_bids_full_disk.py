"""`dimoc bids` on a disk that fills up: each unit whole or not at all, and a later run finishes.

Three subjects (12x12x6, NODDI-Watson signals simulated by `dimoc simulate`) go through
`--pipeline noddi_watson` (a fit cascade whose last maps are written beside the next subject's
fits).  OUTPUT_DIR is a tmpfs sized for the first subject and half of another, mounted in a
mount namespace of its own (`unshare -m`; `-r` too when not root), so the second subject meets
ENOSPC somewhere in its fits, its deferred write or its derivatives.

Checked against the same study run on an ordinary folder:
- the run exits 1; every failed subject is one stderr line naming it and "No space left on
  device"; no temporary folder and no folder of a failed subject is left;
- each subject that is there is complete (its qc.json) and its maps are byte-identical to the
  ordinary run's;
- the same folder on a disk with room (the tmpfs remounted larger): the run exits 0, the
  complete subject is skipped (its files' mtimes unchanged), and every map of every subject is
  byte-identical to the ordinary run's."""
import glob
import json
import os
import shutil
import subprocess

import nibabel as nib
import numpy as np

from dmtest import DIMOC, check, dimoc, finish, workdir

W = workdir("bids_full_disk")
SHAPE = (12, 12, 6)
AFF = np.diag([2.0, 2.0, 2.0, 1.0])
x, y, z = np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij")
R = np.sqrt(((x - 5.5) / 5) ** 2 + ((y - 5.5) / 5) ** 2 + ((z - 2.5) / 2.6) ** 2)
SIM = os.path.join(W, "sim")
os.makedirs(SIM)
BVALS, BVECS = os.path.join(SIM, "bvals"), os.path.join(SIM, "bvecs")
dimoc("scheme", "--shells", "3x0,20x1000,20x2000", "--bvals", BVALS, "--bvecs", BVECS)
maps = dict(S0=np.where(R < 1, 1000.0, 0.0), fiso=np.where(R > 0.8, 0.9, 0.2),
            fintra=np.where(R < 0.45, 0.7, 0.3), kappa=np.where(R < 0.45, 16.0, 1.0),
            th=np.full(SHAPE, np.pi / 2), ph=y / 12.0 * np.pi)
params = []
for name, a in maps.items():
    p = os.path.join(SIM, name + ".nii.gz")
    nib.save(nib.Nifti1Image(a.astype(np.float32), AFF), p)
    params.append(f"{name}={p}")

DS = os.path.join(W, "ds")
os.makedirs(DS)
json.dump({"Name": "synthetic", "BIDSVersion": "1.9.0"}, open(os.path.join(DS, "dataset_description.json"), "w"))
SUBJECTS = ["sub-01", "sub-02", "sub-03"]
for seed, sub in enumerate(SUBJECTS, 1):
    d = os.path.join(DS, sub, "dwi")
    os.makedirs(d)
    dwi = os.path.join(d, sub + "_dwi.nii.gz")
    dimoc("simulate", "noddi_watson", "--bvals", BVALS, "--bvecs", BVECS, "--params", ",".join(params),
          "--noise", "rician", "--snr", 30, "--seed", seed, "--out", dwi)
    side = dwi.replace(".nii.gz", ".provenance.json")
    if os.path.exists(side):
        os.remove(side)
    shutil.copy(BVALS, os.path.join(d, sub + "_dwi.bval"))
    shutil.copy(BVECS, os.path.join(d, sub + "_dwi.bvec"))
    m = os.path.join(DS, "derivatives/masks", sub, "dwi", sub + "_space-dwi_desc-brain_mask.nii.gz")
    os.makedirs(os.path.dirname(m))
    nib.save(nib.Nifti1Image((R < 0.9).astype(np.uint8), AFF), m)

ARGS = ["participant", "--pipeline", "noddi_watson", "--device", "cpu"]

# The reference: the same study on an ordinary folder.
REF = os.path.join(W, "ref")
p = subprocess.run([DIMOC, "bids", DS, REF, *ARGS], capture_output=True, text=True)
check("full-disk-reference-runs", p.returncode == 0, p.stderr.strip()[-400:])


def disk_use(path):
    """Bytes the files under path take on a tmpfs: each file rounded up to 4 KiB pages."""
    total = 0
    for dirpath, dirs, files in os.walk(path):
        total += 4096 * (len(dirs) + 1)
        for f in files:
            total += -(-os.path.getsize(os.path.join(dirpath, f)) // 4096) * 4096
    return total


def maps_of(root, sub):
    return sorted(os.path.relpath(f, root) for f in glob.glob(os.path.join(root, sub, "dwi", "*.nii.gz")))


unit = disk_use(os.path.join(REF, "sub-01"))
top = disk_use(REF) - sum(disk_use(os.path.join(REF, s)) for s in SUBJECTS)
SIZE = top + unit + unit // 2

MNT, KEEP = os.path.join(W, "mnt"), os.path.join(W, "kept")
os.makedirs(MNT)
os.makedirs(KEEP)
UNSHARE = ["unshare", "-m"] + ([] if os.geteuid() == 0 else ["-r"])


def run_on_tmpfs(size, restore):
    """dimoc bids with OUTPUT_DIR on a tmpfs of `size` bytes (KEEP copied in first when
    restore), in a mount namespace; the folder's content is copied back to KEEP afterwards.
    (exit status, stdout, stderr)."""
    script = (f"mount -t tmpfs -o size={size} tmpfs '{MNT}' || exit 99\n"
              + (f"cp -a '{KEEP}'/. '{MNT}'/ || exit 98\n" if restore else "")
              + f"'{DIMOC}' bids '{DS}' '{MNT}/out' {' '.join(ARGS)} >'{W}/so' 2>'{W}/se'\n"
              + f"rc=$?\nrm -rf '{KEEP}'/* '{KEEP}'/.[!.]* 2>/dev/null\ncp -a '{MNT}'/. '{KEEP}'/\nexit $rc\n")
    r = subprocess.run(UNSHARE + ["sh", "-c", script], capture_output=True, text=True)
    return r.returncode, open(f"{W}/so").read() if os.path.exists(f"{W}/so") else "", \
        (open(f"{W}/se").read() if os.path.exists(f"{W}/se") else "") + r.stderr


rc, so, se = run_on_tmpfs(SIZE, False)
OUT = os.path.join(KEEP, "out")
check("full-disk-mounted", rc != 99, se.strip()[-300:])
lines = [l for l in se.splitlines() if l.strip()]
present = [s for s in SUBJECTS if os.path.isdir(os.path.join(OUT, s))]
failed = [s for s in SUBJECTS if s not in present]
check("full-disk-exit-1", rc == 1, f"rc {rc}; stderr {se.strip()[-400:]}")
check("full-disk-first-subject-done", "sub-01" in present and failed, f"present {present}")
check("full-disk-one-line-each",
      all(any(l.startswith(s + ":") and "No space left on device" in l for l in lines) for s in failed),
      "\n".join(lines[-6:]))
left = os.listdir(OUT) if os.path.isdir(OUT) else []
check("full-disk-no-temporary-folder", not [x for x in left if ".tmp." in x], str(left))
complete = all(os.path.exists(os.path.join(OUT, s, "dwi", s + "_qc.json")) for s in present)
same = all(maps_of(OUT, s) == maps_of(REF, s) and all(
    open(os.path.join(OUT, f), "rb").read() == open(os.path.join(REF, f), "rb").read() for f in maps_of(REF, s))
    for s in present)
check("full-disk-present-subjects-whole", complete and same, f"present {present}")

# Room again: the complete subject skipped, the others made, every map as the ordinary run's.
qc1 = os.path.join(OUT, "sub-01", "dwi", "sub-01_qc.json")
mtime = os.path.getmtime(qc1) if os.path.exists(qc1) else None
rc, so, se = run_on_tmpfs(64 << 20, True)
check("full-disk-resume-exit-0", rc == 0, f"rc {rc}; {se.strip()[-400:]}")
check("full-disk-resume-skips-complete",
      mtime is not None and os.path.getmtime(qc1) == mtime, f"{mtime} -> {os.path.getmtime(qc1)}")
same = all(maps_of(OUT, s) == maps_of(REF, s) and maps_of(REF, s) and all(
    open(os.path.join(OUT, f), "rb").read() == open(os.path.join(REF, f), "rb").read() for f in maps_of(REF, s))
    for s in SUBJECTS)
check("full-disk-resume-byte-identical", same, str([maps_of(OUT, s) for s in SUBJECTS]))
finish()
