/* The commands over a tractogram (.tck, TRX or .trk: tractogram/tractogram.h) and images:
 *   dimoc tdi         track-density image (tckmap -template, optionally -vox);
 *   dimoc connectome  streamline counts and mean lengths between parcels (tck2connectome);
 * both optionally with per-streamline weights (-tck_weights_in), as MRtrix's with their
 * defaults; and
 *   dimoc commit      a weight per streamline, fitted to the data (COMMIT).
 * Engines: runtime/fodtrack/tdi.c and connectome.c, runtime/commit_run/commit_run.c. */
#include "args.h"
#include "io/formats.h"
#include "cli.h"
#include "commit_run/commit_files.h"
#include "commit_run/commit_inputs.h"
#include "fodtrack/fodtrack_files.h"
#include "gpu/gpu_device.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tractogram: the positional TRACKS (.tck, .trx or .trk), exactly one. */
static int one_tracks(const char *cmd, const dm_args *a, const char **tracks)
{
    if (a->npositional != 1)
        return dm_set_error(a->npositional ? "%s: one TRACKS.tck only (got '%s' and more; see "
                                             "'dimoc help %s')"
                                           : "%s: give the TRACKS.tck file%s (see 'dimoc help %s')",
                            cmd, a->npositional ? a->positional[0] : "", cmd);
    *tracks = a->positional[0];
    return 0;
}

static int required(const char *cmd, const dm_args *a, const dm_opt *opts, const char *name)
{
    if (dm_arg(a, opts, name)) return 0;
    return dm_set_error("%s: --%s is required (see 'dimoc help %s')", cmd, name, cmd);
}

static int parse_threads(const dm_args *a, const dm_opt *opts, int *threads)
{
    long v = 0;
    if (dm_arg_given(a, opts, "threads") && dm_arg_long(a, opts, "threads", 1, 4096, &v) != 0)
        return -1;
    *threads = (int)v;
    return 0;
}

/* ---- dimoc tdi ---- */

static const dm_opt tdi_opts[] = {
    {"template", "IMG", NULL, "image whose grid (size, voxel -> world) the map takes"},
    {"out", "FILE", NULL, "the map (.nii or .nii.gz; uint32 counts, as tckmap writes them)"},
    {"voxel", "MM[,MM,MM]", NULL,
     "super-resolution: voxel size of the map in mm, on the template's axes and field of view "
     "(as tckmap -template IMG -vox MM)"},
    {"exact", NULL, NULL,
     "count every voxel a segment passes through (an exact walk) instead of tckmap's samples"},
    {"weights", "FILE|dps:NAME", NULL,
     "per-streamline weights (tcksift2's output, or the tractogram's own dps NAME; as tckmap "
     "-tck_weights_in): a streamline adds "
     "its weight instead of 1, and the map is float32"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_tdi(FILE *out)
{
    dm_args_help(
        out,
        "dimoc tdi TRACKS --template IMG --out FILE [--voxel MM] [--exact] [--weights FILE] "
        "[--threads N]",
        "Track-density image, MRtrix's tckmap -template IMG with its defaults, voxel for\n"
        "voxel: in each voxel the number of streamlines that visit it (each counted once\n"
        "however often it re-enters).  As tckmap, each streamline is upsampled along a Hermite\n"
        "curve through its points (ratio ceil(step_size / (0.333 x smallest voxel)), the\n"
        "step from the .tck header; 1 without one) and each sample counts the voxel it\n"
        "rounds to, so voxels a streamline only grazes between samples are missed.  --exact\n"
        "walks every segment through all the voxels it crosses instead (about 6% more\n"
        "voxels at a 1 mm step on 2 mm voxels).  With --voxel the grid is\n"
        "tckmap -template IMG -vox MM's: the template's axes and field of view, size\n"
        "ceil(n * old / new) on each axis.  --weights FILE gives each streamline a weight\n"
        "(one number per streamline of the .tck, in its order, separated by white space or\n"
        "',', '#' comments: tcksift2's output, what MRtrix's -tck_weights_in takes); each\n"
        "voxel then holds the sum of the weights of the streamlines that visit it (float32),\n"
        "as tckmap -tck_weights_in.  TRACKS is an MRtrix .tck, a TRX file (.trx: a zip, its\n"
        "members stored or deflated, or a folder) or a TrackVis .trk, by its ending;\n"
        "--weights dps:NAME takes the weights from the tractogram itself (a TRX's\n"
        "dps/NAME, a .trk's property NAME).  A TRX written by dimoc keeps the .tck header's\n"
        "step_size (header.json's TCK_HEADER), a .trk in its reserved bytes; one without a\n"
        "step_size is not upsampled.  The map's provenance goes beside it\n"
        "(FILE.provenance.json).",
        tdi_opts);
    return 0;
}

/* --voxel: one size for all three axes, or three. */
static int parse_voxel(const char *text, double v[3])
{
    char *end;
    for (int k = 0; k < 3; k++) {
        v[k] = strtod(text, &end);
        if (end == text || !(v[k] > 0) || !isfinite(v[k])) break;
        if (*end == 0 && k == 0) {
            v[1] = v[2] = v[0];
            return 0;
        }
        if (*end == 0 && k == 2) return 0;
        if (*end != ',') break;
        text = end + 1;
    }
    return dm_set_error("tdi: --voxel must be one positive size in mm or three separated by ',' "
                        "(e.g. 0.5 or 0.5,0.5,1)");
}

int dm_cmd_tdi(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("tdi", tdi_opts, dm_help_tdi, argc, argv, &a) != 0) return dm_report_error();
    dm_tdi_options o = {0};
    int rc = one_tracks("tdi", &a, &o.tracks);
    if (rc == 0) rc = required("tdi", &a, tdi_opts, "template");
    if (rc == 0) rc = required("tdi", &a, tdi_opts, "out");
    if (rc == 0 && dm_arg_given(&a, tdi_opts, "voxel"))
        rc = parse_voxel(dm_arg(&a, tdi_opts, "voxel"), o.voxel_mm);
    if (rc == 0) rc = parse_threads(&a, tdi_opts, &o.threads);
    o.exact = dm_arg_given(&a, tdi_opts, "exact");
    if (rc == 0) {
        o.templ = dm_arg(&a, tdi_opts, "template");
        o.out = dm_arg(&a, tdi_opts, "out");
        o.weights = dm_arg(&a, tdi_opts, "weights");
        static const char *const inputs[] = {"template", "weights", NULL};
        dm_provenance prov;
        dm_provenance_begin(&prov, "tdi");
        dm_provenance_args(&prov, &a, tdi_opts, inputs);
        dm_tdi_summary s;
        rc = dm_tdi_command(&o, &prov, &s);
        dm_provenance_free(&prov);
        if (rc == 0)
            printf("tdi: %ld %sstreamlines through %ld of %dx%dx%d voxels (%s) in %.2f s; map "
                   "in %s\n",
                   s.streamlines, o.weights ? "weighted " : "", s.voxels_hit, s.nx, s.ny, s.nz,
                   o.exact       ? "exact walk"
                   : s.ratio > 1 ? "upsampled"
                                 : "points",
                   s.seconds, o.out);
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

/* ---- dimoc connectome ---- */

static const dm_opt connectome_opts[] = {
    {"parc", "IMG", NULL, "parcellation: integer node labels 1..N, 0 outside the nodes"},
    {"out", "DIR", NULL, "output folder (replaced whole when it holds an earlier run)"},
    {"weights", "FILE|dps:NAME", NULL,
     "per-streamline weights (tcksift2's output, or the tractogram's own dps NAME; as "
     "tck2connectome -tck_weights_in): a "
     "streamline counts its weight, and mean lengths are weighted"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_connectome(FILE *out)
{
    dm_args_help(
        out, "dimoc connectome TRACKS --parc IMG --out DIR [--weights FILE] [--threads N]",
        "Structural connectome as MRtrix's tck2connectome with its defaults.  Each end of a\n"
        "streamline goes to the node of the nearest labelled voxel (centre to end point)\n"
        "within 4 mm (tck2connectome's radial search); a streamline whose two ends both find\n"
        "a node counts in that edge, the others nowhere.  Nodes are the labels 1 .. the\n"
        "largest label of IMG.  Writes, as tck2connectome does (N rows of N values separated\n"
        "by ',', the upper triangle with the diagonal, 0 below):\n"
        "  connectome.csv    streamlines per edge\n"
        "  mean_length.csv   their mean length in mm, the sum of segment lengths (as\n"
        "                    tck2connectome -scale_length -stat_edge mean); 0 where none\n"
        "and provenance.json.  --weights FILE gives each streamline a weight (one number per\n"
        "streamline of the .tck, in its order: tcksift2's output), as tck2connectome\n"
        "-tck_weights_in (--weights dps:NAME: the tractogram's own dps NAME; TRACKS is a .tck,\n"
        "a TRX file or folder, or a .trk, by its ending): connectome.csv then holds the sum\n"
        "of the weights of each edge's\n"
        "streamlines, mean_length.csv sum(weight x length) / sum(weight).",
        connectome_opts);
    return 0;
}

int dm_cmd_connectome(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("connectome", connectome_opts, dm_help_connectome, argc, argv, &a) != 0)
        return dm_report_error();
    dm_connectome_options o = {0};
    int rc = one_tracks("connectome", &a, &o.tracks);
    if (rc == 0) rc = required("connectome", &a, connectome_opts, "parc");
    if (rc == 0) rc = required("connectome", &a, connectome_opts, "out");
    if (rc == 0) rc = parse_threads(&a, connectome_opts, &o.threads);
    if (rc == 0) {
        o.parc = dm_arg(&a, connectome_opts, "parc");
        o.out = dm_arg(&a, connectome_opts, "out");
        o.weights = dm_arg(&a, connectome_opts, "weights");
        static const char *const inputs[] = {"parc", "weights", NULL};
        dm_provenance prov;
        dm_provenance_begin(&prov, "connectome");
        dm_provenance_args(&prov, &a, connectome_opts, inputs);
        dm_connectome c;
        rc = dm_connectome_command(&o, &prov, &c);
        dm_provenance_free(&prov);
        if (rc == 0)
            printf("connectome: %d nodes; %ld streamlines assigned, %ld not; matrices in %s\n",
                   c.nodes, c.assigned, c.unassigned, o.out);
        dm_connectome_free(&c);
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

/* ---- dimoc commit ---- */

static const dm_opt commit_opts[] = {
    {"tractogram", "T.tck", NULL,
     "the streamlines to weigh: MRtrix .tck, TRX (.trx, zip or folder) or TrackVis .trk, by "
     "the ending"},
    {"data", "DWI", NULL, "diffusion-weighted data (4D NIfTI)"},
    {"mask", "WM", NULL,
     "white-matter mask: segments outside it are left out (default: the whole image)"},
    {"bvals", "FILE", NULL, "FSL b-values (stick- and cylinder-zeppelin-ball)"},
    {"bvecs", "FILE", NULL, "FSL gradient directions (stick- and cylinder-zeppelin-ball)"},
    {"scheme", "FILE", NULL,
     "cylinder-zeppelin-ball: each volume's gradient strength G (T/m), separation Delta and "
     "duration delta (s), one row per volume: a Camino STEJSKALTANNER scheme (gx gy gz G Delta "
     "delta TE) or a header naming the columns (docs/fitting.md); its b must agree with --bvals"},
    {"peaks", "IMG", NULL,
     "fibre directions per voxel for the extra-cellular zeppelins (sh2peaks' layout, or dimoc "
     "peaks' peaks.nii.gz; NaN = no peak); default: the principal direction of a tensor fit"},
    {"out", "DIR", NULL, "output folder (replaced whole when it holds an earlier run)"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"model", "NAME", "stick-zeppelin-ball",
     "the forward model: stick-zeppelin-ball; cylinder-zeppelin-ball (COMMIT's "
     "CylinderZeppelinBall: one intra-axonal cylinder per --radii for each streamline, its weight "
     "their sum; needs --scheme); or volume-fractions (COMMIT's ScalarMap: --data is a 3D map "
     "that the streamlines explain as the sum of weight x length in each voxel; no --bvals, "
     "--bvecs, --peaks or diffusivities)"},
    {"d-par", "D", "1.7e-3",
     "parallel diffusivity of the stick (or cylinders) and the zeppelin (mm^2/s; "
     "cylinder-zeppelin-ball: 0.6e-3, COMMIT's)"},
    {"d-perp", "D[,D..]", "0.51e-3",
     "perpendicular diffusivities of the zeppelins (mm^2/s), up to 20: one zeppelin per kept "
     "peak for each, COMMIT's d_perps (cylinder-zeppelin-ball: COMMIT's four, "
     "1.19e-3,0.85e-3,0.51e-3,0.17e-3)"},
    {"d-iso", "D[,D..]", "1.7e-3,3.0e-3",
     "diffusivities of the balls (mm^2/s), up to 8 (cylinder-zeppelin-ball: 2.0e-3, COMMIT's)"},
    {"radii", "R[,R..]", "COMMIT's 21",
     "cylinder-zeppelin-ball: the cylinders' radii in micrometres, up to 64 (COMMIT's: 0.01, "
     "then 20 evenly from 0.5 to 8)"},
    {"fiber-shift", "S[,S,S]", "0",
     "move the streamlines by this many voxels (the geometry is right at 0: COMMIT's "
     "fiber_shift 0.5 for MRtrix tractograms)"},
    {"min-seg-len", "MM", "1e-3", "pieces of segments shorter than this are left out"},
    {"min-length", "MM", "0", "streamlines not longer than this inside the mask are left out"},
    {"max-length", "MM", "250", "streamlines not shorter than this inside the mask are left out"},
    {"blur-core-extent", "MM", "0",
     "blur (trk2dictionary's blur_core_extent): each streamline also counts as parallel copies "
     "around it, of weight 1 out to this radius (0 with --blur-gauss-extent 0: no blur)"},
    {"blur-gauss-extent", "MM", "0",
     "blur beyond the core: copies out to this much further, weighted by a Gaussian that falls "
     "to --blur-gauss-min at the rim"},
    {"blur-spacing", "MM", "0.25", "blur: the spacing of the square grid of the copies"},
    {"blur-gauss-min", "W", "0.1", "blur: the Gaussian's weight at the rim, in (0, 1)"},
    {"blur-clust-thr", "MM", "0",
     "cluster the streamlines first (trk2dictionary's blur_clust_thr, dicelib's clustering: "
     "12 points, mean distance below MM) and fit one representative per cluster; the others "
     "get weight 0 (0: no clustering); the per-streamline files (--groups, --lambda-weights, "
     "--blur-apply-to) then hold one value per streamline or, as COMMIT's, per representative"},
    {"blur-apply-to", "FILE|dps:NAME", NULL,
     "blur only some streamlines: a text file of one 0 or 1 per streamline of the tractogram, "
     "in its order (1: blurred; 0: its line alone), or its dps NAME; COMMIT's blur_apply_to"},
    {"iso-mask", "IMG", NULL,
     "balls only in the voxels where this image is nonzero (COMMIT's filename_iso_mask); with "
     "--model volume-fractions COMMIT's lesion model there (docs/commit.md)"},
    {"confidence-map", "IMG", NULL,
     "weights of the data term, 3D (per voxel) or 4D (per measurement), as COMMIT's fit("
     "confidence_map_filename): min 0.5 ||sqrt(W) (A x - y)||^2; adds "
     "fit_RMSE_adjusted.nii.gz and fit_NRMSE_adjusted.nii.gz"},
    {"confidence-map-rescale", NULL, NULL,
     "rescale the confidence map linearly to [0, 1] over the voxels of the fit"},
    {"vf-thr", "F", "0.1",
     "a peak below this fraction of its voxel's largest gets no zeppelin (COMMIT's vf_THR)"},
    {"ndirs", "N", "500", "directions of the response tables over the half sphere"},
    {"tol", "F", "1e-3", "stop when the objective changes by less than this (relative)"},
    {"tol-x", "F", "1e-6", "stop when the weights change by less than this (relative)"},
    {"max-iter", "N", "100", "iterations at most"},
    {"lambda", "F", "0",
     "the lasso on the streamlines' weights, as COMMIT's set_regularisation(('lasso', None, "
     "None), (F, ...)): lambda = F x max |A^T y| over them, every radius's with "
     "cylinder-zeppelin-ball (0: plain non-negative least squares)"},
    {"lambda-group", "F", "0",
     "COMMIT2's group lasso over --groups: lambda = F x max over groups of "
     "||(A^T y)_g|| / w_g, with COMMIT2's weights w_g = sqrt(|g|) / ||x_g|| from a fit without "
     "it first (with cylinder-zeppelin-ball, as COMMIT2's, on the first radius's weights)"},
    {"lambda-ec", "F", "0",
     "the lasso on the extra-axonal (zeppelin) coefficients, as COMMIT's set_regularisation(("
     "..., 'lasso', ...), (..., F, ...)): lambda = F x max |A^T y| over them"},
    {"lambda-iso", "F", "0",
     "the lasso on the isotropic (ball) coefficients, as COMMIT's: lambda = F x max |A^T y| "
     "over them"},
    {"lambda-weights", "FILE|dps:NAME", NULL,
     "a weight >= 0 per streamline of the tractogram, in its order, for the --lambda lasso "
     "(COMMIT's coeff_weights): lambda sum w_f |x_f|, lambda_max = max |A^T y|_f / w_f over "
     "w_f > 0 (0: that streamline is not penalised); with --lambda-group too; dps:NAME: the "
     "tractogram's own dps NAME"},
    {"lambda-iso-weights", "IMG", NULL,
     "a 3D image of weights >= 0 on the data's grid for the --lambda-iso lasso, read in the "
     "voxels with balls (COMMIT's set_wLasso_ISO): lambda sum w_v |x_v|"},
    {"allow-negative", "ic,ec,iso", NULL,
     "drop the non-negativity of these blocks (COMMIT's is_nonnegative False): their lasso is "
     "the plain soft threshold; weights and maps may be negative (filtered.tck keeps weight > "
     "0)"},
    {"debias", NULL, NULL,
     "after a regularised fit, fit again without the regularisation on its support, as COMMIT's "
     "fit(debias=True): only the streamlines' columns >= 1e-15 and every zeppelin and ball, the "
     "signal set to 0 where those streamlines predict none"},
    {"groups", "FILE|dps:NAME", NULL,
     "one group label (an integer >= 0) per streamline of the tractogram, in its order: the "
     "bundles of --lambda-group (e.g. the node pair of each streamline); dps:NAME: the "
     "tractogram's own dps NAME"},
    {"device", "cpu|gpu|auto", "auto",
     "where the dictionary is cut and the solver runs (a --blur's copies are cut on the CPU)"},
    {"gpus", "LIST", "0", "which GPU (an ordinal)"},
    {"threads", "N", "all cores", "CPU threads"},
    {"stage", "all|dictionary", "all",
     "dictionary: only build the dictionary (of the --part share) and save it in --out (needs "
     "--tractogram and --data, with --mask and the dictionary's options as the later run's)"},
    {"part", "K/N", NULL,
     "with --stage dictionary: the K-th of N shares of the streamlines (`dimoc merge` joins "
     "them)"},
    {"dictionary", "DIR", NULL,
     "take the dictionary saved in DIR (--stage dictionary, or its parts merged) instead of "
     "building it; refused unless made from the same tractogram, grid, mask and options"},
    DM_QUIET_OPT,
    {NULL, NULL, NULL, NULL},
};

int dm_help_commit(FILE *out)
{
    dm_args_help(
        out,
        "dimoc commit --tractogram T.tck --data DWI --mask WM --bvals B --bvecs V [--peaks P]\n"
        "             --out DIR [options]",
        "Tractogram filtering as COMMIT (Daducci et al. 2015): each streamline gets the weight\n"
        "that, through a stick-zeppelin-ball model, lets the tractogram explain the measured\n"
        "signal.  A streamline is cut into segments per voxel (lengths and orientations, as\n"
        "COMMIT's trk2dictionary); each voxel it reaches holds one zeppelin per peak and one\n"
        "ball per --d-iso; the signal, divided by its mean b=0 value, is fitted by non-negative\n"
        "least squares (FISTA, COMMIT's schedule and stopping tests).  Writes, with COMMIT's\n"
        "names:\n"
        "  streamline_weights.txt   one weight per streamline of T.tck, in its order (0: left\n"
        "                           out or fitted to 0)\n"
        "  compartment_IC.nii.gz    sum of weight x length of the streamlines in each voxel\n"
        "  compartment_EC.nii.gz    the zeppelins' coefficients, summed per voxel\n"
        "  compartment_ISO.nii.gz   the balls' coefficients, summed per voxel (all of them)\n"
        "  fit_RMSE.nii.gz, fit_NRMSE.nii.gz   the fit's error per voxel (b=0 included)\n"
        "  filtered.tck             the streamlines of weight > 0 (--format trx: filtered.trx,\n"
        "                           their weights as dps commit_weights, on the data's grid;\n"
        "                           --format trk: filtered.trk, the weights as its property\n"
        "                           commit_weights)\n"
        "and provenance.json with the time of each stage.  The tractogram may be a .tck, a TRX\n"
        "(.trx: zip or folder) or a .trk; the per-streamline files (--groups, --lambda-weights,\n"
        "--blur-apply-to) may be given as dps:NAME, the tractogram's own dps NAME.\n"
        "\n"
        "With --blur-core-extent or --blur-gauss-extent > 0 each streamline stands for a tube:\n"
        "parallel copies around it, weighted (trk2dictionary's blur; docs/commit.md, \"Blur\").\n"
        "\n"
        "--model cylinder-zeppelin-ball (COMMIT's CylinderZeppelinBall) needs --scheme FILE, the\n"
        "pulses' G, Delta, delta per volume; each streamline gets one coefficient per --radii,\n"
        "its weight their sum.\n"
        "\n"
        "Regularisation as COMMIT's set_regularisation: --lambda (weighted per streamline with\n"
        "--lambda-weights), --lambda-group with --groups, --lambda-ec, --lambda-iso (weighted per\n"
        "voxel with --lambda-iso-weights); --allow-negative lifts x >= 0 from some blocks;\n"
        "--debias refits on the regularised fit's support (docs/commit.md, \"Weighted lassos,\n"
        "negative blocks, debias\").\n"
        "\n"
        "The dictionary stage alone, over a share of the streamlines (a cluster job each):\n"
        "  dimoc commit --tractogram T.tck --data DWI --mask WM --stage dictionary --part K/N \\\n"
        "               --out partK            (K = 1..N; dictionary.bin, its header, part.json)\n"
        "  dimoc merge part1 ... partN --out dict    (or one run without --part)\n"
        "  dimoc commit ... --dictionary dict --out DIR   (the outputs of a plain run, byte\n"
        "               for byte; see docs/commit.md, \"The dictionary in parts\")",
        commit_opts);
    return 0;
}

/* A list of 1 or 3 numbers (--fiber-shift). */
static int parse_shift(const char *text, double s[3])
{
    char *end;
    for (int i = 0; i < 3; i++) {
        s[i] = strtod(text, &end);
        if (end == text || !isfinite(s[i]))
            return dm_set_error("commit: --fiber-shift '%s' is not 1 or 3 numbers", text);
        if (i == 0 && *end == 0) {
            s[1] = s[2] = s[0];
            return 0;
        }
        if (i < 2 && *end != ',')
            return dm_set_error("commit: --fiber-shift '%s' is not 1 or 3 numbers", text);
        text = end + 1;
    }
    if (*end) return dm_set_error("commit: --fiber-shift '%s' is not 1 or 3 numbers", text);
    return 0;
}

/* --radii (micrometres) into m->radius (metres); NULL: COMMIT's CylinderZeppelinBall radii,
 * 0.01 um then 20 evenly spaced from 0.5 to 8 um. */
static int parse_radii(const char *text, dm_commit_model *m)
{
    m->nradii = 0;
    if (!text) {
        dm_commit_default_radii(m);
        return 0;
    }
    for (const char *p = text; *p;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0) || !isfinite(v) || m->nradii == DM_COMMIT_MAX_RADII ||
            (*end && *end != ','))
            return dm_set_error("commit: --radii '%s' is not a list of up to %d radii > 0 "
                                "(micrometres)",
                                text, DM_COMMIT_MAX_RADII);
        m->radius[m->nradii++] = v * 1e-6;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* --d-iso, --d-perp: a comma list of at most max diffusivities >= 0 into v, *n of them. */
static int parse_diffusivities(const char *opt, const char *text, int max, double *v, int *n)
{
    *n = 0;
    for (const char *p = text; *p;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || !(x >= 0) || !isfinite(x) || *n == max)
            return dm_set_error("commit: --%s '%s' is not up to %d diffusivities >= 0", opt, text,
                                max);
        v[(*n)++] = x;
        if (*end == ',')
            end++;
        else if (*end)
            return dm_set_error("commit: --%s '%s' is not a list of numbers", opt, text);
        p = end;
    }
    return 0;
}

int dm_cmd_commit(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("commit", commit_opts, dm_help_commit, argc, argv, &a) != 0)
        return dm_report_error();
    dm_arg_quiet(&a, commit_opts);
    dm_commit_options o = {0};
    int rc = 0;
    if (a.npositional)
        rc = dm_set_error("commit: unexpected '%s' (the tractogram is --tractogram; see 'dimoc "
                          "help commit')",
                          a.positional[0]);
    const char *model = dm_arg(&a, commit_opts, "model");
    const int scalar = strcmp(model, "volume-fractions") == 0;
    const int cylinder = strcmp(model, "cylinder-zeppelin-ball") == 0;
    if (rc == 0 && !scalar && !cylinder && strcmp(model, "stick-zeppelin-ball") != 0)
        rc = dm_set_error("commit: --model '%s' is not known (stick-zeppelin-ball, "
                          "cylinder-zeppelin-ball or volume-fractions; see 'dimoc help commit')",
                          model);
    const char *stage = dm_arg(&a, commit_opts, "stage");
    o.stage_dictionary = strcmp(stage, "dictionary") == 0;
    if (rc == 0 && !o.stage_dictionary && strcmp(stage, "all") != 0)
        rc = dm_set_error("commit: --stage '%s' is not known (all or dictionary)", stage);
    if (rc == 0) rc = dm_part_parse(dm_arg(&a, commit_opts, "part"), &o.part);
    if (rc == 0 && o.part.n > 0 && !o.stage_dictionary)
        rc = dm_set_error("commit: --part splits the dictionary stage only (add --stage "
                          "dictionary; then --dictionary takes the merged parts)");
    o.dictionary = dm_arg(&a, commit_opts, "dictionary");
    if (rc == 0 && o.dictionary && o.stage_dictionary)
        rc = dm_set_error("commit: --dictionary and --stage dictionary do not go together");
    static const char *const need[] = {"tractogram", "data", "out", "bvals", "bvecs", NULL};
    for (int i = 0; rc == 0 && need[i] && (!(scalar || o.stage_dictionary) || i < 3); i++)
        rc = required("commit", &a, commit_opts, need[i]);
    /* a scalar map has no acquisition, no peaks and no diffusivities */
    static const char *const not_scalar[] = {"bvals", "bvecs",  "peaks", "d-par",     "d-perp",
                                             "d-iso", "vf-thr", "ndirs", "lambda-ec", NULL};
    for (int i = 0; rc == 0 && scalar && not_scalar[i]; i++)
        if (dm_arg_given(&a, commit_opts, not_scalar[i]))
            rc = dm_set_error("commit: --%s is not used by --model volume-fractions (a scalar map; "
                              "see 'dimoc help commit')",
                              not_scalar[i]);
    if (rc == 0 && !cylinder)
        for (int i = 0; rc == 0 && i < 2; i++)
            if (dm_arg_given(&a, commit_opts, i ? "radii" : "scheme"))
                rc = dm_set_error("commit: --%s is read by --model cylinder-zeppelin-ball only",
                                  i ? "radii" : "scheme");
    if (rc == 0 && cylinder && !o.stage_dictionary && !dm_arg_given(&a, commit_opts, "scheme"))
        rc = dm_set_error("commit: --model cylinder-zeppelin-ball needs --scheme FILE (each "
                          "volume's G, Delta and delta: a Camino STEJSKALTANNER scheme)");
    long ndirs = 0, iters = 0;
    if (rc == 0) rc = parse_threads(&a, commit_opts, &o.threads);
    if (rc == 0) rc = dm_arg_long(&a, commit_opts, "ndirs", 1, 65535, &ndirs);
    if (rc == 0) rc = dm_arg_long(&a, commit_opts, "max-iter", 1, 100000000, &iters);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "d-par", &o.model.d_par);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "min-seg-len", &o.min_seg_len);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "min-length", &o.min_len);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "max-length", &o.max_len);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "vf-thr", &o.vf_thr);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "blur-core-extent", &o.blur_core);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "blur-gauss-extent", &o.blur_gauss);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "blur-spacing", &o.blur_spacing);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "blur-gauss-min", &o.blur_gauss_min);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "blur-clust-thr", &o.blur_clust_thr);
    o.blur_apply_to = dm_arg(&a, commit_opts, "blur-apply-to");
    o.iso_mask = dm_arg(&a, commit_opts, "iso-mask");
    o.confidence_map = dm_arg(&a, commit_opts, "confidence-map");
    o.confidence_rescale = dm_arg_given(&a, commit_opts, "confidence-map-rescale");
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "tol", &o.tol_fun);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "tol-x", &o.tol_x);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "lambda", &o.lambda_frac);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "lambda-group", &o.group_frac);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "lambda-ec", &o.lambda_ec_frac);
    if (rc == 0) rc = dm_arg_double(&a, commit_opts, "lambda-iso", &o.lambda_iso_frac);
    o.lambda_weights = dm_arg(&a, commit_opts, "lambda-weights");
    o.lambda_iso_weights = dm_arg(&a, commit_opts, "lambda-iso-weights");
    o.debias = dm_arg_given(&a, commit_opts, "debias");
    if (rc == 0)
        rc = dm_commit_parse_blocks(dm_arg(&a, commit_opts, "allow-negative"), &o.free_blocks);
    o.groups = dm_arg(&a, commit_opts, "groups");
    if (rc == 0 && cylinder && !dm_arg_given(&a, commit_opts, "d-par")) o.model.d_par = 0.6e-3;
    if (rc == 0)
        rc = parse_diffusivities("d-iso",
                                 cylinder && !dm_arg_given(&a, commit_opts, "d-iso")
                                     ? "2.0e-3"
                                     : dm_arg(&a, commit_opts, "d-iso"),
                                 DM_COMMIT_MAX_ISO, o.model.d_iso, &o.model.niso);
    /* cylinder-zeppelin-ball: COMMIT's model default, four zeppelins (docs/commit.md) */
    const char *perps = cylinder && !dm_arg_given(&a, commit_opts, "d-perp")
                            ? "1.19e-3,0.85e-3,0.51e-3,0.17e-3"
                            : dm_arg(&a, commit_opts, "d-perp");
    if (rc == 0)
        rc = parse_diffusivities("d-perp", perps, DM_COMMIT_MAX_PERP, o.model.d_perp,
                                 &o.model.nperp);
    if (rc == 0 && cylinder)
        rc = parse_radii(dm_arg_given(&a, commit_opts, "radii") ? dm_arg(&a, commit_opts, "radii")
                                                                : NULL,
                         &o.model);
    if (rc == 0) rc = parse_shift(dm_arg(&a, commit_opts, "fiber-shift"), o.shift);
    if (rc == 0) rc = dm_commit_options_check(&o);
    /* a GPU is looked for while the inputs load */
    o.device = dm_arg(&a, commit_opts, "device");
    if (rc == 0) rc = dm_gpu_device_check(o.device, "commit");
    o.gpus = dm_arg(&a, commit_opts, "gpus");
    o.model_name = model;
    if (rc == 0) {
        o.model.ec_on = !scalar;
        o.model.scalar = scalar;
        /* COMMIT's ScalarMap: streamlines alone, one direction; with --iso-mask its lesion model
         * (one ISO compartment of response -1 in the mask's voxels) */
        if (scalar) o.model.niso = o.iso_mask ? 1 : 0;
        o.ndirs = scalar ? 1 : (int)ndirs;
        o.max_iter = (int)iters;
        o.tractogram = dm_arg(&a, commit_opts, "tractogram");
        o.data = dm_arg(&a, commit_opts, "data");
        o.mask = dm_arg(&a, commit_opts, "mask");
        o.bvals = dm_arg(&a, commit_opts, "bvals");
        o.bvecs = dm_arg(&a, commit_opts, "bvecs");
        o.scheme = dm_arg(&a, commit_opts, "scheme");
        o.peaks = dm_arg(&a, commit_opts, "peaks");
        o.out = dm_arg(&a, commit_opts, "out");
        static const char *const inputs[] = {"tractogram",
                                             "data",
                                             "mask",
                                             "bvals",
                                             "bvecs",
                                             "peaks",
                                             "groups",
                                             "dictionary",
                                             "blur-apply-to",
                                             "iso-mask",
                                             "confidence-map",
                                             "scheme",
                                             "lambda-weights",
                                             "lambda-iso-weights",
                                             NULL};
        dm_provenance prov;
        dm_provenance_begin(&prov, "commit");
        dm_provenance_args(&prov, &a, commit_opts, inputs);
        dm_commit_summary sm;
        rc = dm_commit_command(&o, &prov, &sm);
        dm_provenance_free(&prov);
        if (rc == 0 && o.stage_dictionary)
            printf("commit: dictionary of streamlines [%ld, %ld) of %ld: %ld kept, %ld segments; "
                   "%.2f s; saved in %s\n",
                   sm.first, sm.end, sm.streamlines, sm.kept, sm.segments, sm.seconds, o.out);
        else if (rc == 0)
            printf("commit: %ld of %ld streamlines in the fit, %ld with weight > 0; %ld voxels; "
                   "%ld iterations (%s), objective %.6g; %.2f s; results in %s\n",
                   sm.kept, sm.streamlines, sm.nonzero, sm.voxels, sm.iterations, sm.stopped,
                   sm.objective, sm.seconds, o.out);
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
