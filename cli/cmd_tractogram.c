/* The commands over a tractogram (.tck) and an image, as MRtrix's with their defaults:
 *   dimoc tdi         track-density image (tckmap -template, optionally -vox);
 *   dimoc connectome  streamline counts and mean lengths between parcels (tck2connectome);
 * both optionally with per-streamline weights (-tck_weights_in).
 * Engines: runtime/fodtrack/tdi.c and connectome.c. */
#include "args.h"
#include "cli.h"
#include "provenance_args.h"
#include "fodtrack/connectome.h"
#include "fodtrack/tdi.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tractogram: the positional TRACKS.tck, exactly one. */
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
    {"weights", "FILE", NULL,
     "per-streamline weights (tcksift2's output; as tckmap -tck_weights_in): a streamline adds "
     "its weight instead of 1, and the map is float32"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_tdi(FILE *out)
{
    dm_args_help(
        out,
        "dimoc tdi TRACKS.tck --template IMG --out FILE [--voxel MM] [--exact] [--weights FILE] "
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
        "as tckmap -tck_weights_in.  The map's provenance goes beside it\n"
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
    if (dm_args_parse("tdi", tdi_opts, argc, argv, &a) != 0) return dm_report_error();
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
    {"weights", "FILE", NULL,
     "per-streamline weights (tcksift2's output; as tck2connectome -tck_weights_in): a "
     "streamline counts its weight, and mean lengths are weighted"},
    {"threads", "N", "all cores", "CPU threads"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_connectome(FILE *out)
{
    dm_args_help(
        out, "dimoc connectome TRACKS.tck --parc IMG --out DIR [--weights FILE] [--threads N]",
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
        "-tck_weights_in: connectome.csv then holds the sum of the weights of each edge's\n"
        "streamlines, mean_length.csv sum(weight x length) / sum(weight).",
        connectome_opts);
    return 0;
}

int dm_cmd_connectome(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("connectome", connectome_opts, argc, argv, &a) != 0) return dm_report_error();
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
