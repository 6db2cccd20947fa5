"""MRtrix reads dimoc track's .tck files: tckinfo counts the streamlines of a file written by
--save-streamlines as nibabel does, and tckstats measures the lengths that nibabel's points give.
Needs MRtrix3 (Debian's mrtrix3, installed by scripts/install-deps.sh)."""
import re
import shutil
import subprocess

import nibabel as nib
import numpy as np

from dmtest import check, dimoc, finish, save, workdir


def phantom(d, shape=(30, 8, 8), ns=20):
    """bedpostx-style folder: fibres along x with a 10 degree spread (streamlines of varied
    lengths), in a 2 mm image with a world offset."""
    aff = np.array([[2.0, 0, 0, -20], [0, 2, 0, 4], [0, 0, 2, -6], [0, 0, 0, 1]])
    rng = np.random.default_rng(5)
    v = np.zeros(shape + (ns, 3))
    v[..., 0] = -1  # +x in voxel axes is -x in FSL's frame (positive determinant)
    v += rng.normal(scale=np.radians(10), size=v.shape)
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    save(f"{d}/merged_th1samples.nii.gz", np.arccos(np.clip(v[..., 2], -1, 1)), aff)
    save(f"{d}/merged_ph1samples.nii.gz", np.arctan2(v[..., 1], v[..., 0]), aff)
    save(f"{d}/merged_f1samples.nii.gz", np.full(shape + (ns,), 0.6), aff)
    save(f"{d}/nodif_brain_mask.nii.gz", np.ones(shape), aff)
    seed = np.zeros(shape)
    seed[10:12, 3:5, 3:5] = 1
    return d, save(f"{d}/seed.nii.gz", seed, aff)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    d = workdir("track_tckinfo")
    if not shutil.which("tckinfo") or not shutil.which("tckstats"):
        check("track_tck_mrtrix_reads", False, "MRtrix3's tckinfo/tckstats not found (scripts/install-deps.sh installs mrtrix3)")
        return
    bp, seed = phantom(d)
    tck = f"{d}/t.tck"
    dimoc("track", "--samples", bp, "--seed", seed, "--out", f"{d}/out", "-P", 30, "-c", 0.8,
          "--save-streamlines", tck, "--save-max", 137)
    sl = [np.asarray(s) for s in nib.streamlines.load(tck).streamlines]
    rc, out = run("tckinfo", "-count", tck)
    actual = re.search(r"actual count in file:\s*(\d+)", out)
    header = re.search(r"^\s*count:\s*(\d+)", out, re.M)
    n_actual = int(actual.group(1)) if actual else -1
    n_header = int(header.group(1)) if header else -1
    check("track_tck_mrtrix_tckinfo_count", rc == 0 and n_actual == len(sl) == n_header == 137,
          f"tckinfo: rc {rc}, header count {n_header}, counted {n_actual}; nibabel {len(sl)} (want 137)")
    rc, _ = run("tckstats", "-quiet", "-force", tck, "-dump", f"{d}/lengths.txt")
    mrtrix_len = np.loadtxt(f"{d}/lengths.txt", ndmin=1) if rc == 0 else np.zeros(0)
    ours = np.array([np.linalg.norm(np.diff(s, axis=0), axis=1).sum() for s in sl])
    ok = rc == 0 and len(mrtrix_len) == len(ours) and np.allclose(mrtrix_len, ours, atol=1e-3) \
        and ours.std() > 0.5
    check("track_tck_mrtrix_tckstats_lengths", ok,
          f"tckstats rc {rc}, {len(mrtrix_len)} lengths, max difference from nibabel's "
          f"{np.abs(mrtrix_len - ours).max() if len(mrtrix_len) == len(ours) else 'n/a'} mm, "
          f"lengths {ours.min():.1f}..{ours.max():.1f} mm")


if __name__ == "__main__":
    main()
    finish()
