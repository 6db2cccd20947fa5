/* dimoc track, in two modes:
 *   --samples DIR  probtrackx-style probabilistic tractography over the orientation samples of a
 *                  bedpostx-style folder (see track_kernel.h for the stepping, track_outputs.h
 *                  for the files it writes);
 *   --fod FILE     FOD tractography as MRtrix's tckgen (iFOD2, iFOD1, SD_STREAM:
 *                  runtime/fodtrack/). */
#include "args.h"
#include "io/formats.h"
#include "cli.h"
#include "util/outdir.h"
#include "util/error.h"
#include "gpu/gpu_device.h"
#include "track/track_field.h"
#include "track/track_gpu.h"
#include "track/track_masks.h"
#include "track/track_outputs.h"
#include "track/track_run.h"
#include "track/track_seeds.h"
#include "fodtrack/fodtrack_files.h"
#include "util/cmdline.h"
#include "cluster/part.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt track_opts[] = {
    {"samples", "DIR", NULL, "bedpostx-style folder: merged_{th,ph,f}<k>samples, nodif_brain_mask"},
    {"seed", "FILE", NULL,
     "seed mask image, GIFTI surface (.gii: every vertex), or text file of "
     "x y z world mm coordinates (one a row)"},
    {"x", "FILE", NULL, "same as --seed (probtrackx's -x)"},
    {"out", "DIR", NULL, "output folder"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"P", "N", "5000", "streamlines per seed"},
    {"nsamples", "N", NULL, "same as -P (probtrackx's name)"},
    {"S", "N", "2000", "maximum steps of a streamline, both halves together"},
    {"nsteps", "N", NULL, "same as -S"},
    {"steplength", "MM", "0.5", "step length in mm"},
    {"c", "COS", "0.2", "curvature threshold: minimum |cosine| between successive steps"},
    {"cthr", "COS", NULL, "same as -c"},
    {"fibthresh", "F", "0.01", "follow only fibres whose volume fraction is above F"},
    {"randfib", "0..3", "0",
     "first fibre at the seed: 0 --fibst, 1 random among f > fibthresh, "
     "2 those in proportion to f, 3 all in proportion to f"},
    {"fibst", "K", "1", "fibre (1-based) that --randfib 0 starts on"},
    {"loopcheck", NULL, NULL, "stop a streamline that turns back into a 5-voxel cell it crossed"},
    {"modeuler", NULL, NULL, "modified Euler (midpoint) integration"},
    {"nearest", NULL, NULL,
     "sample orientations at the nearest voxel (default: probabilistic "
     "interpolation between the 8 neighbours)"},
    {"bvecs-frame", "fsl|voxel", "fsl",
     "frame of the sample angles: fsl (bedpostx: x reversed in "
     "positive-determinant images) or voxel axes"},
    {"stop", "MASK", NULL, "stop streamlines where they enter this mask (seed space)"},
    {"avoid", "MASK|SURF.gii", NULL,
     "reject streamlines that enter this mask (seed space) or "
     "cross this GIFTI surface (world mm)"},
    {"waypoints", "MASK|LIST,..", NULL,
     "keep only streamlines through these masks (images, or "
     "text files listing images; up to 32)" DM_REPEATABLE},
    {"waycond", "AND|OR", "AND", "all waypoint masks, or any one"},
    {"onewaycondition", NULL, NULL,
     "apply the waypoint condition to each half alone (a half "
     "that misses it is dropped, the other kept)"},
    {"network", NULL, NULL,
     "--seed lists 2..32 masks: keep only streamlines that reach a mask "
     "other than their own; writes fdt_network_matrix, waytotal per mask"},
    {"distthresh", "MM", "0", "reject streamlines shorter than MM (both halves together)"},
    {"sampvox", "MM", "0",
     "start each streamline at a uniform random point of the ball of "
     "radius MM around its seed"},
    {"targetmasks", "LIST", NULL, "text file listing target masks (for --os2t)"},
    {"os2t", NULL, NULL, "write seeds_to_<target> counts"},
    {"omatrix1", NULL, NULL, "seed x seed matrix fdt_matrix1.dot"},
    {"omatrix2", NULL, NULL, "seed x --target2 matrix fdt_matrix2.dot"},
    {"target2", "MASK", NULL, "columns of matrix 2 (any grid; matched by world mm)"},
    {"omatrix3", NULL, NULL, "--target3 x --target3 matrix fdt_matrix3.dot"},
    {"target3", "MASK", NULL, "nodes of matrix 3 (any grid; matched by world mm)"},
    {"opd", NULL, NULL, "write the path distribution fdt_paths.nii.gz"},
    {"xfm", "FILE", NULL, "4x4 FLIRT matrix from seed space (--seedref) to diffusion space"},
    {"seedref", "IMAGE", NULL,
     "reference image of seed space (default: the seed image, or the "
     "diffusion space for coordinate seeds)"},
    {"rseed", "N", "0",
     "random seed (Philox stream per streamline: results do not depend on threads)"},
    {"save-streamlines", "FILE.tck", NULL,
     "also write kept streamlines, world mm: MRtrix .tck, TRX (.trx) or TrackVis .trk by FILE's "
     "ending, or --format's tractogram format (trx, trk: on the seed space's grid)"},
    {"save-max", "N", "10000", "at most N streamlines in that file (the first, in seed order)"},
    {"threads", "N", "all cores", "CPU threads"},
    {"device", "cpu|gpu|auto", "auto", "where to track (auto: a usable GPU, else the CPU)"},
    {"gpus", "all|0,1,..", "all",
     "GPUs to use; each takes chunks of streamlines from a shared queue"},
    {"gpu-memory", "MB", "70% of free", "cap on the device memory each GPU's launches use"},
    {"part", "K/N", NULL,
     "track only the K-th of N shares of the streamlines (seeds x P, in id order); `dimoc "
     "merge` joins the parts' folders into this run's files, byte for byte"},
    DM_QUIET_OPT,
    {NULL, NULL, NULL, NULL},
};

static const dm_opt fod_opts[] = {
    {"fod", "FILE", NULL, "FOD image: SH coefficients in MRtrix's basis (dimoc csd's wm_fod)"},
    {"seed", "MASK", NULL, "seed image: seeds at random positions within its voxels >= 0.5"},
    {"out", "DIR", NULL,
     "output folder: tracks.tck (tracks.trx, tracks.trk: --format), provenance.json, and what is "
     "asked for"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"algorithm", "ifod2|ifod1|sd_stream", "ifod2",
     "iFOD2 (arcs, 4 samples per step), iFOD1 (FOD sampling per step), SD_STREAM (peaks)"},
    {"seed-random-per-voxel", "N", NULL,
     "N seeds at random positions in every --seed voxel (instead of random voxels)"},
    {"select", "N", "5000", "streamlines to keep (0: as many as --seeds give)"},
    {"seeds", "N", "1000 x select", "seeds to try at most (0: no limit)"},
    {"step", "MM", "0.5 x voxel (ifod2), 0.1 x voxel", "step size (iFOD2: the arc length)"},
    {"angle", "DEG", "45 (ifod2), 15 (ifod1), 60 (sd_stream)", "maximum angle per step"},
    {"cutoff", "A", "0.1", "FOD amplitude below which a streamline stops"},
    {"seed-cutoff", "A", "--cutoff", "FOD amplitude an initial direction needs"},
    {"min-length", "MM", "5 x voxel", "shorter streamlines are rejected"},
    {"max-length", "MM", "100 x voxel",
     "longer ones stop (iFOD2's output is cut at exactly this length, as tckgen's)"},
    {"trials", "N", "1000", "proposals per step at most (iFOD1, iFOD2)"},
    {"power", "P", "1/samples (ifod2), 1 (ifod1)", "raise the FOD to this power"},
    {"samples", "N", "4", "iFOD2: samples per step (the arc's points and its start)"},
    {"max-attempts-per-seed", "N", "1000", "random initial directions tried per seed"},
    {"unidirectional", NULL, NULL, "track from the seed one way only"},
    {"include", "IMG", NULL, "keep only streamlines that visit this region" DM_REPEATABLE},
    {"exclude", "IMG", NULL, "reject streamlines that enter this region" DM_REPEATABLE},
    {"mask", "IMG", NULL, "streamlines stop where they leave these regions" DM_REPEATABLE},
    {"stop", NULL, NULL, "stop a streamline once it has visited every --include region"},
    {"act", "5TT", NULL,
     "anatomically-constrained tractography on this five-tissue image (cortical GM, "
     "sub-cortical GM, WM, CSF, pathology), as tckgen -act: streamlines end in grey matter, "
     "those entering CSF or stopping in white matter are rejected; cutoff 0.05 and minimum "
     "length 2 x voxel by default"},
    {"backtrack", NULL, NULL, "ACT: a streamline about to be rejected goes back and tries again"},
    {"crop-at-gmwmi", NULL, NULL, "ACT: end streamlines on the grey-white matter interface"},
    {"seed-gmwmi", "IMG", NULL,
     "ACT: seeds on the grey-white interface, drawn in proportion to this image (5tt2gmwmi's); "
     "instead of --seed"},
    {"tdi", "NAME.nii[.gz]", NULL,
     "also write the track-density image NAME in --out (streamlines per voxel, each counted "
     "once; on the FOD's grid), mapped where the tracking runs"},
    {"tdi-voxel", "MM", "the FOD's", "super-resolved TDI voxels, as tckmap -template FOD -vox MM"},
    {"tdi-exact", NULL, NULL,
     "the TDI by an exact walk through every voxel a segment crosses, instead of tckmap's "
     "samples (the default: tckmap -template FOD on the tracks, voxel for voxel)"},
    {"connectome", "PARC", NULL,
     "also write connectome.csv (streamline counts) and mean_length.csv between the labels of "
     "this parcellation, as tck2connectome's defaults (endpoints to the nearest label within "
     "4 mm, upper triangle)"},
    {"weights", "NAME", NULL,
     "also write NAME in --out: one weight per streamline of the tracks, in their order, one a "
     "line (1 each; the file MRtrix's -tck_weights_in and dimoc tdi/connectome --weights take, "
     "for a filtering such as COMMIT or SIFT2 to replace)"},
    {"rseed", "N", "0", "random seed (a Philox stream per streamline: same seed, same tracks)"},
    {"threads", "N", "all cores", "CPU threads"},
    {"device", "cpu|gpu|auto", "auto", "where to track (auto: a usable GPU, else the CPU)"},
    {"gpus", "N", "0", "the GPU to use (its ordinal)"},
    {"gpu-memory", "MB", "70% of free", "cap on the device memory used"},
    {"precision", "float|double", "float",
     "floating point of the tracking (double: CPU and GPU trace the same points)"},
    {"part", "K/N", NULL,
     "track only the K-th of N shares of the seed ids (needs --seeds N or "
     "--seed-random-per-voxel, no --select); `dimoc merge` joins the parts' folders into this "
     "run's files, byte for byte"},
    DM_QUIET_OPT,
    {NULL, NULL, NULL, NULL},
};

int dm_help_track(FILE *out)
{
    dm_args_help(
        out, "dimoc track --samples DIR --seed SEED --out DIR [options]",
        "Probabilistic streamline tractography with FSL probtrackx2's semantics and output\n"
        "names.  From every seed, P streamlines; each starts on a sampled fibre orientation\n"
        "and runs both ways.  At each step it draws a random sample of the voxel's\n"
        "orientations and follows the fibre closest to its direction (f > fibthresh), and\n"
        "stops on leaving nodif_brain_mask, on a turn sharper than the curvature threshold,\n"
        "in a --stop mask, at a loop (--loopcheck) or after S/2 steps each way.  Writes\n"
        "waytotal, and fdt_paths (--opd), seeds_to_<target> (--os2t), fdt_matrix1/2/3.dot\n"
        "with coords_for_fdt_matrix* files (sparse, 1-based rows and columns).",
        track_opts);
    fprintf(out, "\n");
    dm_args_help(
        out, "dimoc track --fod FOD (--seed MASK | --act 5TT --seed-gmwmi IMG) --out DIR [options]",
        "FOD tractography with MRtrix tckgen's algorithms, defaults and rules: iFOD2 (arcs of\n"
        "constant curvature drawn by rejection sampling against a calibrated envelope),\n"
        "iFOD1 or SD_STREAM, seeds at random in the seed mask, tracked both ways, stopped\n"
        "below the FOD cutoff, past the angle, outside the image or --mask; tckgen's length\n"
        "rules and regions.  Writes tracks.tck (MRtrix format, world mm, count and\n"
        "total_count as tckgen's) and provenance.json (counts of every termination); with\n"
        "--weights NAME also a weights file of tracks.tck (1 per streamline).  --format trx\n"
        "writes tracks.trx instead (TRX: positions float32, offsets uint64, header.json on the\n"
        "FOD's grid, tckgen's header lines with count and total_count in its TCK_HEADER),\n"
        "--format trk tracks.trk (TrackVis, voxel mm on the FOD's grid; n_count).",
        fod_opts);
    return 0;
}

static const char *const fod_inputs[] = {"fod",  "seed",       "include", "exclude",
                                         "mask", "connectome", NULL};

/* dimoc track --fod. */
static int cmd_fodtrack(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("track", fod_opts, dm_help_track, argc, argv, &a) != 0)
        return dm_report_error();
    dm_arg_quiet(&a, fod_opts);
    dm_fodtrack_options o;
    memset(&o, 0, sizeof o);
    o.step = o.angle = o.cutoff = o.seed_cutoff = o.min_length = o.max_length = o.power = NAN;
    o.select = o.seeds = o.trials = o.samples = o.max_attempts = -1;
    long rseed = 0, threads = 0;
    int rc = 0;
    if (a.npositional)
        rc = dm_set_error("track: unexpected argument '%s' (see 'dimoc help track')",
                          a.positional[0]);
    static const char *const required[] = {"fod", "out"};
    for (int i = 0; i < 2 && rc == 0; i++)
        if (!dm_arg(&a, fod_opts, required[i]))
            rc = dm_set_error("track: --%s is required with --fod (see 'dimoc help track')",
                              required[i]);
    if (rc == 0 && !dm_arg(&a, fod_opts, "seed") == !dm_arg(&a, fod_opts, "seed-gmwmi"))
        rc = dm_set_error("track: give one of --seed and --seed-gmwmi (see 'dimoc help track')");
    static const char *const longs[] = {
        "select", "seeds", "trials", "samples", "max-attempts-per-seed", "seed-random-per-voxel"};
    long *long_dst[] = {&o.select,  &o.seeds,        &o.trials,
                        &o.samples, &o.max_attempts, &o.seeds_per_voxel};
    for (int i = 0; i < 6 && rc == 0; i++)
        if (dm_arg_given(&a, fod_opts, longs[i]))
            rc = dm_arg_long(&a, fod_opts, longs[i], i < 2 ? 0 : 1, 1L << 40, long_dst[i]);
    static const char *const doubles[] = {"step",       "angle",      "cutoff", "seed-cutoff",
                                          "min-length", "max-length", "power"};
    double *dbl_dst[] = {&o.step,       &o.angle,      &o.cutoff, &o.seed_cutoff,
                         &o.min_length, &o.max_length, &o.power};
    for (int i = 0; i < 7 && rc == 0; i++)
        if (dm_arg_given(&a, fod_opts, doubles[i]))
            rc = dm_arg_double(&a, fod_opts, doubles[i], dbl_dst[i]);
    if (rc == 0) rc = dm_arg_long(&a, fod_opts, "rseed", 0, 0x7fffffffffffffffL, &rseed);
    if (rc == 0 && dm_arg_given(&a, fod_opts, "threads"))
        rc = dm_arg_long(&a, fod_opts, "threads", 1, 4096, &threads);
    if (rc == 0 && dm_arg_given(&a, fod_opts, "tdi-voxel")) {
        rc = dm_arg_double(&a, fod_opts, "tdi-voxel", &o.tdi_voxel);
        if (rc == 0 && !(o.tdi_voxel > 0))
            rc = dm_set_error("track: --tdi-voxel must be a positive size in mm");
        if (rc == 0 && !dm_arg_given(&a, fod_opts, "tdi"))
            rc = dm_set_error("track: --tdi-voxel needs --tdi NAME");
    }
    o.tdi_exact = dm_arg_given(&a, fod_opts, "tdi-exact");
    if (rc == 0 && o.tdi_exact && !dm_arg_given(&a, fod_opts, "tdi"))
        rc = dm_set_error("track: --tdi-exact needs --tdi NAME");
    o.tdi = dm_arg(&a, fod_opts, "tdi");
    if (rc == 0 && o.tdi) {
        size_t len = strlen(o.tdi);
        int nii = (len > 4 && !strcmp(o.tdi + len - 4, ".nii")) ||
                  (len > 7 && !strcmp(o.tdi + len - 7, ".nii.gz"));
        if (strchr(o.tdi, '/') || !nii || !strcmp(o.tdi, "provenance.json"))
            rc = dm_set_error("track: --tdi takes a file name for --out, ending .nii or .nii.gz "
                              "(not '%s')",
                              o.tdi);
    }
    o.connectome = dm_arg(&a, fod_opts, "connectome");
    const char *weights = dm_arg(&a, fod_opts, "weights");
    if (rc == 0 && weights) {
        /* a plain file name in --out, none of the other outputs' */
        static const char *const taken[] = {"tracks.tck",     "provenance.json", "part.json",
                                            "connectome.csv", "mean_length.csv", NULL};
        char tracks[32]; /* tracks.tck, or .trx / .trk by --format */
        snprintf(tracks, sizeof tracks, "tracks%s",
                 dm_tracts_format_ext(dm_tracts_format_chosen()));
        int clash = !*weights || strchr(weights, '/') || !strcmp(weights, ".") ||
                    !strcmp(weights, tracks) || !strcmp(weights, "..") ||
                    (o.tdi && !strcmp(weights, o.tdi));
        for (int i = 0; taken[i] && !clash; i++)
            clash = !strcmp(weights, taken[i]) && (i < 3 || o.connectome);
        if (clash)
            rc = dm_set_error("track: --weights takes a file name for --out, not a path or the "
                              "name of another output (not '%s')",
                              weights);
    }
    if (rc == 0 && dm_arg_given(&a, fod_opts, "gpu-memory"))
        rc = dm_arg_long(&a, fod_opts, "gpu-memory", 1, 1L << 30, &o.gpu_memory_mb);
    const char *precision = dm_arg(&a, fod_opts, "precision");
    if (rc == 0 && strcmp(precision, "float") && strcmp(precision, "double"))
        rc = dm_set_error("track: --precision must be float or double, not '%s'", precision);
    o.algorithm = dm_arg(&a, fod_opts, "algorithm");
    if (rc == 0 && strcmp(o.algorithm, "ifod2") && strcmp(o.algorithm, "ifod1") &&
        strcmp(o.algorithm, "sd_stream"))
        rc = dm_set_error("track: --algorithm must be ifod2, ifod1 or sd_stream, not '%s'",
                          o.algorithm);
    if (rc == 0 && o.seeds_per_voxel > 0 &&
        (dm_arg_given(&a, fod_opts, "select") || dm_arg_given(&a, fod_opts, "seeds")))
        rc = dm_set_error("track: --seed-random-per-voxel fixes the seeds; it cannot go with "
                          "--select or --seeds");
    if (rc == 0) rc = dm_gpu_resolve_device(dm_arg(&a, fod_opts, "device"), "track", &o.use_gpu);
    if (rc == 0) rc = dm_part_parse(dm_arg(&a, fod_opts, "part"), &o.part);
    if (rc == 0 && o.part.n > 0 && o.seeds_per_voxel <= 0 &&
        (dm_arg_given(&a, fod_opts, "select") && o.select != 0))
        rc = dm_set_error("track: --select cannot go with --part (which streamlines are kept "
                          "depends on every earlier seed): give --seeds N instead");
    if (rc == 0 && o.part.n > 0 && o.seeds_per_voxel <= 0 && o.seeds <= 0)
        rc = dm_set_error("track: --part needs a fixed seed count: --seeds N (or "
                          "--seed-random-per-voxel)");
    if (rc != 0) {
        dm_args_free(&a);
        return dm_report_error();
    }
    o.fod = dm_arg(&a, fod_opts, "fod");
    o.seed = dm_arg(&a, fod_opts, "seed");
    o.out = dm_arg(&a, fod_opts, "out");
    o.include = dm_arg(&a, fod_opts, "include");
    o.exclude = dm_arg(&a, fod_opts, "exclude");
    o.mask = dm_arg(&a, fod_opts, "mask");
    o.unidirectional = dm_arg_given(&a, fod_opts, "unidirectional");
    o.act = dm_arg(&a, fod_opts, "act");
    o.seed_gmwmi = dm_arg(&a, fod_opts, "seed-gmwmi");
    o.backtrack = dm_arg_given(&a, fod_opts, "backtrack");
    o.crop_at_gmwmi = dm_arg_given(&a, fod_opts, "crop-at-gmwmi");
    o.stop = dm_arg_given(&a, fod_opts, "stop");
    o.rseed = (unsigned long long)rseed;
    o.threads = (int)threads;
    o.use_double = !strcmp(precision, "double");
    o.gpus = dm_arg(&a, fod_opts, "gpus");
    char *history = dm_part_history(&o.part);
    o.history = history;
    dm_provenance prov;
    dm_provenance_begin(&prov, "track");
    dm_provenance_args(&prov, &a, fod_opts, fod_inputs);
    rc = dm_fodtrack_command(&o, weights, &prov);
    dm_provenance_free(&prov);
    if (rc == 0)
        printf("track: streamlines in %s/tracks%s%s%s\n", o.out,
               dm_tracts_format_ext(dm_tracts_format_chosen()), weights ? ", weights in " : "",
               weights ? weights : "");
    free(history);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

/* --fod anywhere selects FOD tractography (its own options). */
static int wants_fod(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--fod") || !strncmp(argv[i], "--fod=", 6)) return 1;
    return 0;
}

static int parse_options(dm_args *a, dm_track_options *o)
{
    memset(o, 0, sizeof *o);
    long per_seed = 5000, nsteps = 2000, randfib = 0, fibst = 1, rseed = 0, tck_max = 10000,
         threads = 0;
    /* probtrackx's long names override the short ones when given */
    const char *p_name = dm_arg_given(a, track_opts, "nsamples") ? "nsamples" : "P";
    const char *s_name = dm_arg_given(a, track_opts, "nsteps") ? "nsteps" : "S";
    const char *c_name = dm_arg_given(a, track_opts, "cthr") ? "cthr" : "c";
    if (dm_arg_long(a, track_opts, p_name, 1, 100000000L, &per_seed) ||
        dm_arg_long(a, track_opts, s_name, 2, 1000000L, &nsteps) ||
        dm_arg_double(a, track_opts, "steplength", &o->steplength) ||
        dm_arg_double(a, track_opts, c_name, &o->cthr) ||
        dm_arg_double(a, track_opts, "fibthresh", &o->fibthresh) ||
        dm_arg_long(a, track_opts, "randfib", 0, 3, &randfib) ||
        dm_arg_long(a, track_opts, "fibst", 1, 8, &fibst) ||
        dm_arg_long(a, track_opts, "rseed", 0, 0x7fffffffffffffffL, &rseed) ||
        dm_arg_long(a, track_opts, "save-max", 0, 100000000L, &tck_max) ||
        dm_arg_double(a, track_opts, "distthresh", &o->distthresh) ||
        dm_arg_double(a, track_opts, "sampvox", &o->sampvox))
        return -1;
    if (!(o->distthresh >= 0)) return dm_set_error("track: --distthresh must be >= 0 mm");
    if (!(o->sampvox >= 0)) return dm_set_error("track: --sampvox must be >= 0 mm");
    if (dm_arg_given(a, track_opts, "threads") &&
        dm_arg_long(a, track_opts, "threads", 1, 4096, &threads))
        return -1;
    if (!(o->steplength > 0)) return dm_set_error("track: --steplength must be > 0");
    if (o->cthr < -1 || o->cthr > 1) return dm_set_error("track: -c is a cosine, in [-1, 1]");
    const char *frame = dm_arg(a, track_opts, "bvecs-frame");
    if (strcmp(frame, "fsl") && strcmp(frame, "voxel"))
        return dm_set_error("track: --bvecs-frame must be fsl or voxel, not '%s'", frame);
    o->per_seed = per_seed;
    o->nsteps = nsteps;
    o->randfib = (int)randfib;
    o->fibst = (int)fibst;
    o->rseed = (unsigned long long)rseed;
    o->threads = (int)threads;
    o->fsl_frame = !strcmp(frame, "fsl");
    o->loopcheck = dm_arg_given(a, track_opts, "loopcheck");
    o->oneway = dm_arg_given(a, track_opts, "onewaycondition");
    o->network = dm_arg_given(a, track_opts, "network");
    o->modeuler = dm_arg_given(a, track_opts, "modeuler");
    o->nearest = dm_arg_given(a, track_opts, "nearest");
    o->opd = dm_arg_given(a, track_opts, "opd");
    o->os2t = dm_arg_given(a, track_opts, "os2t");
    o->matrix1 = dm_arg_given(a, track_opts, "omatrix1");
    o->matrix2 = dm_arg_given(a, track_opts, "omatrix2");
    o->matrix3 = dm_arg_given(a, track_opts, "omatrix3");
    o->tck_max = dm_arg_given(a, track_opts, "save-streamlines") ? tck_max : 0;
    if (o->os2t && !dm_arg(a, track_opts, "targetmasks"))
        return dm_set_error("track: --os2t needs --targetmasks");
    if (o->matrix2 && !dm_arg(a, track_opts, "target2"))
        return dm_set_error("track: --omatrix2 needs --target2");
    if (o->matrix3 && !dm_arg(a, track_opts, "target3"))
        return dm_set_error("track: --omatrix3 needs --target3");
    o->gpus = dm_arg(a, track_opts, "gpus");
    if (dm_part_parse(dm_arg(a, track_opts, "part"), &o->part) != 0) return -1;
    if (dm_arg_given(a, track_opts, "gpu-memory") &&
        dm_arg_long(a, track_opts, "gpu-memory", 1, 1L << 30, &o->gpu_memory_mb))
        return -1;
    return dm_gpu_resolve_device(dm_arg(a, track_opts, "device"), "track", &o->use_gpu);
}

/* DIR/nodif_brain_mask with the ending that exists (for the seed space of coordinate seeds). */
static char *diffusion_mask_path(const char *dir)
{
    static const char *endings[] = {".nii.gz", ".nii", ".hdr"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(dir) + 40;
        char *p = malloc(n);
        snprintf(p, n, "%s/nodif_brain_mask%s", dir, endings[i]);
        FILE *fp = fopen(p, "rb");
        if (fp) {
            fclose(fp);
            return p;
        }
        free(p);
    }
    return NULL;
}

/* --part with --save-streamlines: the .tck must be a part's file (a plain name in --out), and
 * its first --save-max streamlines of the whole run must not depend on the earlier parts (the
 * cap can bind only past every streamline). */
static int check_part_tck(const dm_track_options *o, const dm_track_seeds *s, const char *out,
                          const char *tck)
{
    if (!tck) return 0;
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') n--;
    if (strncmp(tck, out, n) || tck[n] != '/' || strchr(tck + n + 1, '/'))
        return dm_set_error("track: with --part, --save-streamlines must name a file in --out "
                            "(%s/NAME.tck), which `dimoc merge` joins",
                            out);
    unsigned long long total = (unsigned long long)s->n * (unsigned long long)o->per_seed;
    if ((unsigned long long)o->tck_max < total)
        return dm_set_error("track: --save-streamlines with --part needs --save-max N of at least "
                            "every streamline (%llu: seeds x P), as the first N of the whole run "
                            "depend on every earlier part",
                            total);
    return 0;
}

int dm_cmd_track(int argc, char **argv)
{
    if (wants_fod(argc, argv)) return cmd_fodtrack(argc, argv);
    dm_args a;
    if (dm_args_parse("track", track_opts, dm_help_track, argc, argv, &a) != 0)
        return dm_report_error();
    dm_arg_quiet(&a, track_opts);
    dm_track_field field;
    dm_track_seeds seeds;
    dm_track_masks masks;
    dm_track_result result;
    dm_track_options o;
    memset(&field, 0, sizeof field);
    memset(&seeds, 0, sizeof seeds);
    memset(&masks, 0, sizeof masks);
    memset(&result, 0, sizeof result);
    char *mask_path = NULL;
    int rc = 0;
    const char *samples = dm_arg(&a, track_opts, "samples");
    const char *seed = dm_arg(&a, track_opts, "seed");
    const char *out = dm_arg(&a, track_opts, "out");
    if (!seed) seed = dm_arg(&a, track_opts, "x");
    if (a.npositional) {
        rc = dm_set_error("track: unexpected argument '%s' (see 'dimoc help track')",
                          a.positional[0]);
        goto done;
    }
    if (!samples || !seed || !out) {
        rc = dm_set_error(
            "track: --samples, --seed and --out are required (see 'dimoc help track')");
        goto done;
    }
    if ((rc = parse_options(&a, &o)) != 0) goto done;
    if ((rc = dm_outdir_check(out, DM_OUTDIR_REPLACE)) != 0) goto done; /* before the work */
    if ((rc = dm_track_field_load(samples, o.fsl_frame, &field)) != 0) goto done;
    mask_path = diffusion_mask_path(samples);
    if ((rc = dm_track_seeds_load(seed, dm_arg(&a, track_opts, "seedref"),
                                  dm_arg(&a, track_opts, "xfm"), mask_path, &field, &seeds)) != 0)
        goto done;
    dm_track_mask_paths mp = {
        .stop = dm_arg(&a, track_opts, "stop"),
        .avoid = dm_arg(&a, track_opts, "avoid"),
        .waypoints = dm_arg(&a, track_opts, "waypoints"),
        .waycond = dm_arg(&a, track_opts, "waycond"),
        .targetmasks = o.os2t ? dm_arg(&a, track_opts, "targetmasks") : NULL,
        .target2 = o.matrix2 ? dm_arg(&a, track_opts, "target2") : NULL,
        .target3 = o.matrix3 ? dm_arg(&a, track_opts, "target3") : NULL,
        .matrix1 = o.matrix1,
    };
    if ((rc = dm_track_masks_load(&mp, &seeds, &masks)) != 0) goto done;
    if (o.network && (rc = dm_track_masks_network(&seeds, &masks)) != 0) goto done;
    if (o.part.n > 0 &&
        (rc = check_part_tck(&o, &seeds, out, dm_arg(&a, track_opts, "save-streamlines"))) != 0)
        goto done;
    rc = o.use_gpu ? dm_track_run_gpu(&field, &seeds, &masks, &o, &result)
                   : dm_track_run(&field, &seeds, &masks, &o, &result);
    if (rc != 0) goto done;
    static const char *const inputs[] = {"samples",     "seed",    "x",       "seedref",
                                         "xfm",         "stop",    "avoid",   "waypoints",
                                         "targetmasks", "target2", "target3", NULL};
    dm_provenance prov;
    dm_provenance_begin(&prov, "track");
    dm_provenance_args(&prov, &a, track_opts, inputs);
    rc = dm_track_save(out, dm_arg(&a, track_opts, "save-streamlines"), &seeds, &masks, &o, &result,
                       &prov);
    dm_provenance_free(&prov);
    if (rc != 0) goto done;
    char where[300];
    if (o.use_gpu)
        snprintf(where, sizeof where, "%s", result.device);
    else
        snprintf(where, sizeof where, "%d threads", result.threads);
    printf("track: %ld seeds x %ld = %llu streamlines, %llu kept (waytotal), %.1f points each, "
           "%.0f streamlines/s on %s\n",
           seeds.n, o.per_seed, result.generated, result.waytotal,
           result.generated ? (double)result.steps / result.generated : 0.0,
           result.seconds > 0 ? result.generated / result.seconds : 0.0, where);
    printf("track: half-streamline ends: %llu step limit, %llu mask, %llu curvature, %llu stop, "
           "%llu avoid, %llu loop\n",
           result.ends[0], result.ends[1], result.ends[2], result.ends[3], result.ends[4],
           result.ends[5]);
    if (o.use_gpu && (o.matrix1 || o.matrix2 || o.matrix3))
        printf(
            "track: host time merging matrix keys %.2f s, waiting for the GPU %.2f s (of %.2f s)\n",
            result.merge_seconds, result.wait_seconds, result.seconds);
done:
    free(mask_path);
    dm_track_result_free(&result);
    dm_track_masks_free(&masks);
    dm_track_seeds_free(&seeds);
    dm_track_field_free(&field);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
