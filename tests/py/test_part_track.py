"""dimoc track --part K/N and dimoc merge: a run split into N parts and merged gives the files of
the single run byte for byte (`cmp`: every file but provenance.json), for N = 1, 3 and 7, on the
CPU:

  --fod, iFOD2 and SD_STREAM: tracks.tck (the whole run's header, counts summed, the history's
    --out the merge's), the TDI (summed), connectome.csv (counts summed), mean_length.csv (from
    the parts' exact length sums), the --weights file (lines);
  --samples (probtrackx-style): waytotal, fdt_paths, seeds_to_<target>, fdt_matrix1/2/3.dot
    (sparse, summed per entry), their coords files, the --save-streamlines .tck; and --network
    (waytotal per mask, fdt_network_matrix).

And the refusals: a part killed mid-run (SIGKILL) leaves no part.json, and merge refuses, naming
the missing part; --select with --part is refused in one line; --save-streamlines whose cap can
bind is refused with --part."""
import filecmp
import os
import shutil
import signal
import subprocess
import time

import numpy as np

import fodsim as fs
from dmtest import DIMOC, check, dimoc, finish, save, workdir

PARTS = (1, 3, 7)


def outputs(d):
    """The files of an output folder but provenance.json and merge's parts/ records."""
    return sorted(f for f in os.listdir(d) if f != "provenance.json" and f != "parts")


def compare(name, whole, merged):
    a, b = outputs(whole), outputs(merged)
    if a != b:
        check(name, False, f"files differ: single run {a}, merged {b}")
        return
    differ = [f for f in a if not filecmp.cmp(f"{whole}/{f}", f"{merged}/{f}", shallow=False)]
    check(name, not differ, f"{len(a)} files identical ({', '.join(a)})" if not differ
          else f"differ: {differ}")


def split_and_merge(tag, d, run, n):
    """run(out, *extra) runs the command into out; the parts into d/tag_n_k, merged into d/x
    (the single run's --out, moved to d/tag_whole before).  Returns the merge's status."""
    parts = []
    for k in range(1, n + 1):
        p = f"{d}/{tag}_{n}_{k}"
        run(p, "--part", f"{k}/{n}")
        if not os.path.exists(f"{p}/part.json"):
            check(f"{tag}-{n}-part{k}-manifest", False, "no part.json")
        parts.append(p)
    shutil.rmtree(f"{d}/x", ignore_errors=True)
    rc, _, err = dimoc("merge", *parts[::-1], "--out", f"{d}/x", "--quiet", expect_ok=False)
    return rc, err


def whole_and_parts(tag, d, run, parts=PARTS):
    shutil.rmtree(f"{d}/x", ignore_errors=True)
    run(f"{d}/x")
    whole = f"{d}/{tag}_whole"
    os.rename(f"{d}/x", whole)
    for n in parts:
        rc, err = split_and_merge(tag, d, run, n)
        if rc:
            check(f"{tag}-{n}-parts-merge", False, err.strip())
            continue
        compare(f"{tag}-{n}-parts-equal-single-run", whole, f"{d}/x")
    return whole


# --- FOD tracking ---------------------------------------------------------------------------------
def parcellation(d, p):
    ij = np.stack(np.meshgrid(*[np.arange(n) for n in fs.SHAPE], indexing="ij"), -1)
    labels = 1 + ij[..., 0] * 4 // fs.SHAPE[0] + 4 * (ij[..., 1] * 4 // fs.SHAPE[1])
    labels[~fs.brain(p["q"])] = 0
    return fs.save(f"{d}/parc.nii.gz", labels, p["affine"], np.int16)


def fod_parts(d, device="cpu", precision="float", parts=PARTS, seeds=(400, 600)):
    """iFOD2 and SD_STREAM with a TDI, a connectome and weights: the single run against its
    parts merged (on the device given; tests/gpu/test_fodtrack_gpu.py runs it on the GPU)."""
    os.makedirs(d, exist_ok=True)
    p = fs.phantom(d)
    parc = parcellation(d, p)
    for alg, n in zip(("ifod2", "sd_stream"), seeds):
        def run(out, *extra, alg=alg, n=n):
            dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", out, "--algorithm", alg,
                  "--seeds", n, "--rseed", 7, "--threads", 2, "--device", device, "--precision",
                  precision, "--tdi", "tdi.nii.gz", "--connectome", parc, "--weights", "weights.txt",
                  *extra)
        whole = whole_and_parts(f"{alg}-{device}", d, run, parts)
        hdr = fs.tck_header(f"{whole}/tracks.tck")
        check(f"{alg}-{device}-single-run-sane", 0 < int(hdr["count"]) <= int(hdr["total_count"]) <= n,
              f"count {hdr['count']}, total_count {hdr['total_count']}")
    return p


def fod_tests(root):
    d = f"{root}/fod"
    p = fod_parts(d)
    # --seed-random-per-voxel fixes the seeds too
    def run_spv(out, *extra):
        dimoc("track", "--fod", p["fod"], "--seed", p["straight"], "--out", out, "--seed-random-per-voxel", 2,
              "--rseed", 3, "--threads", 2, "--device", "cpu", "--tdi", "t.nii", *extra)
    whole_and_parts("ifod2-per-voxel", d, run_spv)
    # more parts than seeds: parts with no seed at all (empty tracks.tck, zero maps)
    def run_tiny(out, *extra):
        dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", out, "--seeds", 3, "--rseed", 3,
              "--threads", 2, "--device", "cpu", "--tdi", "t.nii.gz", "--connectome", f"{d}/parc.nii.gz", *extra)
    whole_and_parts("ifod2-empty-parts", d, run_tiny, parts=(7,))

    # refusals: one line each, no folder
    for opts, what in ((["--select", 100, "--seeds", 1000], "--select"), ([], "--seeds")):
        rc, _, err = dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", f"{d}/refused", *opts,
                           "--part", "1/2", "--device", "cpu", expect_ok=False)
        lines = err.strip().splitlines()
        check(f"fod-part-refuses-without-fixed-seeds{'-select' if opts else ''}",
              rc != 0 and len(lines) == 1 and what in lines[0] and "--part" in lines[0]
              and not os.path.exists(f"{d}/refused"), f"rc {rc}: {err.strip()}")

    # a part killed mid-run: no part.json anywhere, merge refuses naming part 2
    big = f"{d}/killed_2"
    proc = subprocess.Popen([DIMOC, "track", "--fod", p["fod"], "--seed", p["wm"], "--out", big, "--seeds",
                             "400000", "--rseed", "7", "--threads", "2", "--device", "cpu", "--part", "2/2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = [f for f in os.listdir(d) if f.startswith("killed_2") or ".killed_2" in f]
    manifests = [f for f in left if os.path.exists(f"{d}/{f}/part.json")]
    check("killed-part-leaves-no-manifest", running and not manifests,
          f"still running when killed: {running}; left behind {left}")
    # merge the parts there are: part 1 of another finished run of 2 parts, and the killed one
    def run2(out, *extra):
        dimoc("track", "--fod", p["fod"], "--seed", p["wm"], "--out", out, "--seeds", 200, "--rseed", 7,
              "--threads", 2, "--device", "cpu", *extra)
    run2(f"{d}/ok_1", "--part", "1/2")
    rc, _, err = dimoc("merge", f"{d}/ok_1", "--out", f"{d}/merged_missing", expect_ok=False)
    check("merge-refuses-missing-part", rc != 0 and "part 2 of 2 is missing" in err
          and not os.path.exists(f"{d}/merged_missing"), err.strip())
    rc, _, err = dimoc("merge", f"{d}/ok_1", big, "--out", f"{d}/merged_killed", expect_ok=False)
    check("merge-refuses-killed-part", rc != 0 and big in err and not os.path.exists(f"{d}/merged_killed"),
          err.strip())


# --- probtrackx-style tracking --------------------------------------------------------------------
def write_bedpost(d, shape=(24, 10, 8), ns=30):
    """Two crossing populations (x and y) with a small spread, in FSL's frame."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(4)
    aff = np.diag([2.0, 2.0, 2.0, 1.0])
    for k, axis in enumerate(([1.0, 0, 0], [0, 1.0, 0])):
        v = np.broadcast_to(np.array(axis), shape + (ns, 3)) + rng.normal(scale=0.1, size=shape + (ns, 3))
        v = v / np.linalg.norm(v, axis=-1, keepdims=True) * np.array([-1.0, 1, 1])
        save(f"{d}/merged_th{k + 1}samples.nii.gz", np.arccos(np.clip(v[..., 2], -1, 1)), aff)
        save(f"{d}/merged_ph{k + 1}samples.nii.gz", np.arctan2(v[..., 1], v[..., 0]), aff)
        save(f"{d}/merged_f{k + 1}samples.nii.gz", np.full(shape + (ns,), 0.4 if k == 0 else 0.25), aff)
    save(f"{d}/nodif_brain_mask.nii.gz", np.ones(shape), aff)
    return aff, shape


def mask(d, name, aff, shape, where):
    m = np.zeros(shape, np.float32)
    m[where] = 1
    return save(f"{d}/{name}.nii.gz", m, aff)


def samples_parts(d, device="cpu", parts=PARTS):
    """The probtrackx-style engine with every matrix and map, and --network: the single run
    against its parts merged (tests/gpu/test_track_gpu.py runs it on the GPU)."""
    bp = f"{d}/bp"
    aff, shape = write_bedpost(bp)
    seed = mask(d, "seed", aff, shape, np.s_[10:13, 3:6, 3:5])
    t1 = mask(d, "t1", aff, shape, np.s_[0:3, :, :])
    t2 = mask(d, "t2", aff, shape, np.s_[20:24, :, :])
    with open(f"{d}/targets.txt", "w") as f:
        f.write(f"{t1}\n{t2}\n")
    target2 = mask(d, "target2", aff, shape, np.s_[::3, ::3, ::2])
    target3 = mask(d, "target3", aff, shape, np.s_[2::4, 1::3, 1::3])

    def run(out, *extra):
        dimoc("track", "--samples", bp, "--seed", seed, "--out", out, "-P", 40, "--rseed", 5, "--threads", 2,
              "--device", device, "--opd", "--os2t", "--targetmasks", f"{d}/targets.txt", "--omatrix1",
              "--omatrix2", "--target2", target2, "--omatrix3", "--target3", target3, "--loopcheck",
              "--distthresh", 25, "--randfib", 2, "--save-streamlines", f"{out}/kept.tck", "--save-max", 100000, *extra)
    whole = whole_and_parts(f"samples-{device}", d, run, parts)
    want = {"waytotal", "fdt_paths.nii.gz", "seeds_to_t1.nii.gz", "fdt_matrix1.dot", "fdt_matrix2.dot",
            "fdt_matrix3.dot", "kept.tck"}
    kept = int(open(f"{whole}/waytotal").read()) if os.path.exists(f"{whole}/waytotal") else -1
    check(f"samples-{device}-single-run-writes-all", want <= set(outputs(whole)) and 0 < kept < 720,
          f"{outputs(whole)}; waytotal {kept} of 720 (--distthresh rejects some)")

    net = [mask(d, f"net{i}", aff, shape, np.s_[4 + 7 * i:6 + 7 * i, 3:6, 3:5]) for i in range(3)]
    with open(f"{d}/net.txt", "w") as f:
        f.write("\n".join(net) + "\n")

    def run_net(out, *extra):
        dimoc("track", "--samples", bp, "--seed", f"{d}/net.txt", "--network", "--out", out, "-P", 30,
              "--rseed", 9, "--threads", 2, "--device", device, "--opd", *extra)
    whole_and_parts(f"network-{device}", d, run_net, parts)
    return bp, seed


def samples_tests(root):
    d = f"{root}/samples"
    bp, seed = samples_parts(d)

    rc, _, err = dimoc("track", "--samples", bp, "--seed", seed, "--out", f"{d}/refused", "-P", 40,
                       "--save-streamlines", f"{d}/refused/kept.tck", "--save-max", 10, "--part", "1/2",
                       "--device", "cpu", expect_ok=False)
    lines = err.strip().splitlines()
    check("samples-part-refuses-binding-save-max", rc != 0 and len(lines) == 1 and "--save-max" in lines[0]
          and not os.path.exists(f"{d}/refused"), err.strip())


if __name__ == "__main__":
    root = workdir("part_track")
    fod_tests(root)
    samples_tests(root)
    finish()
