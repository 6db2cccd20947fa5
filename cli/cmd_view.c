/* dimoc view: a quick-look PNG of the three mid-slices of a map, drawn by
 * runtime/render/slices.c (whose header describes the orientation conventions), or of an
 * FOD's glyphs (runtime/render/fod_glyphs.c). */
#include "args.h"
#include "cli.h"
#include "render/png_write.h"
#include "io/volume.h"
#include "render/fod_glyphs.h"
#include "render/slices.h"
#include "sphere/sh.h"
#include "util/error.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt view_opts[] = {
    {"o", "FILE", NULL, "the PNG to write"},
    {"out", "FILE", NULL, "the same as -o"},
    {"rgb-from", "DYADS", NULL,
     "colour by direction: a 3-volume map of unit vectors, |x|,|y|,|z| -> R,G,B"},
    {"weight", "MAP", NULL,
     "with --rgb-from: scale the colours by this map (e.g. FA or f1), "
     "divided by its 99th percentile of the non-zero voxels"},
    {"glyphs", NULL, NULL,
     "draw MAP as FOD glyphs (SH coefficients: 6, 15, 28, 45, 66, 91, ... volumes)"},
    {"volume", "N", "0", "the volume of a 4D scalar map to show (never glyphs)"},
    {"window", "LO,HI", NULL, "grey window (default: percentiles 1 and 99 of the non-zero voxels)"},
    {"zoom", "Z", "auto",
     "pixels per smallest voxel size (auto: the largest panel is about 256 pixels); with "
     "glyphs, pixels per voxel (auto: 14)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_view(FILE *out)
{
    dm_args_help(
        out,
        "dimoc view MAP.nii.gz -o PNG | dimoc view --rgb-from DYADS [--weight MAP] -o PNG\n"
        "       dimoc view FOD.nii.gz [--glyphs] -o PNG",
        "Writes a PNG of the three mid-slices, axial, coronal and sagittal side by side, in\n"
        "the neurological convention (the subject's left on the left; anterior at the top\n"
        "of the axial panel and on the left of the sagittal panel; superior at the top),\n"
        "with voxel sizes respected.  A scalar map is drawn in grey; with --rgb-from the\n"
        "colour is the direction, |x|,|y|,|z| as red, green, blue, weighted by --weight (a\n"
        "positional MAP is taken as the weight).  NaN and Inf voxels are black.\n"
        "An FOD (real SH coefficients in MRtrix's basis, world frame) is drawn as glyphs:\n"
        "each voxel a polar plot of the FOD seen along the panel's normal, coloured by\n"
        "direction, sized against the largest.  Glyphs are drawn with --glyphs, and without\n"
        "it for a MAP of 15, 28, 45, 66, 91, ... volumes (lmax 4 and above) unless --volume\n"
        "or --window is given (then one volume is drawn in grey).",
        view_opts);
    return 0;
}

static int parse_window(const char *s, double *lo, double *hi)
{
    char *end;
    *lo = strtod(s, &end);
    if (end == s || *end != ',') return -1;
    const char *s2 = end + 1;
    *hi = strtod(s2, &end);
    if (end == s2 || *end || !isfinite(*lo) || !isfinite(*hi) || *hi <= *lo) return -1;
    return 0;
}

int dm_cmd_view(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("view", view_opts, dm_help_view, argc, argv, &a) != 0)
        return dm_report_error();
    /* One picture is little work, and pipelines draw theirs at once (four or more processes):
     * a team of every core each only spins against the others. */
    if (omp_get_max_threads() > 4) omp_set_num_threads(4);
    dm_volume map = {0}, dyads = {0}, weight = {0};
    dm_picture pic = {0};
    int rc = 0;
    const char *out = dm_arg(&a, view_opts, "o");
    if (!out) out = dm_arg(&a, view_opts, "out");
    const char *rgb = dm_arg(&a, view_opts, "rgb-from");
    const char *wpath = dm_arg(&a, view_opts, "weight");
    const char *mpath = a.npositional > 0 ? a.positional[0] : NULL;
    long volume = 0, zoom = 0;
    const char *zoom_s = dm_arg(&a, view_opts, "zoom");
    dm_slices_settings s = {0};

    if (!out) {
        rc = dm_set_error("view: -o PNG is required");
        goto done;
    }
    if (a.npositional > 1) {
        rc = dm_set_error("view: one map only (got '%s' and '%s')", a.positional[0],
                          a.positional[1]);
        goto done;
    }
    if (rgb && mpath && wpath) {
        rc = dm_set_error("view: give the weight once, as --weight or as MAP, not both");
        goto done;
    }
    if (!rgb && !mpath) {
        rc = dm_set_error("view: give a MAP to show, or --rgb-from DYADS");
        goto done;
    }
    if (!rgb && wpath) {
        rc = dm_set_error("view: --weight goes with --rgb-from");
        goto done;
    }
    int glyphs = dm_arg_given(&a, view_opts, "glyphs");
    if (glyphs && (rgb || !mpath)) {
        rc = dm_set_error("view: --glyphs draws a positional FOD MAP, not --rgb-from");
        goto done;
    }
    if (rgb && !wpath) wpath = mpath;
    if ((rc = dm_arg_long(&a, view_opts, "volume", 0, 1L << 30, &volume)) != 0) goto done;
    if (strcmp(zoom_s, "auto") != 0 && (rc = dm_arg_long(&a, view_opts, "zoom", 1, 64, &zoom)) != 0)
        goto done;

    if (rgb) {
        if ((rc = dm_volume_read(rgb, &dyads)) != 0) goto done;
        if (dyads.nt != 3) {
            rc = dm_set_error("%s: --rgb-from needs 3 volumes (x, y, z of a direction), it has %d",
                              rgb, dyads.nt);
            goto done;
        }
        if (wpath && ((rc = dm_volume_read(wpath, &weight)) != 0 ||
                      (rc = dm_volume_check_same_grid(&weight, wpath, &dyads, rgb)) != 0))
            goto done;
        s.dyads = &dyads;
        if (wpath) s.weight = &weight;
    } else {
        if ((rc = dm_volume_read(mpath, &map)) != 0) goto done;
        int auto_glyphs = dm_sh_lmax_for(map.nt) >= 4 && dm_is_sh_count(map.nt) &&
                          !dm_arg_given(&a, view_opts, "volume") &&
                          !dm_arg_given(&a, view_opts, "window");
        if (glyphs && !dm_is_sh_count(map.nt)) {
            rc = dm_set_error("%s: --glyphs needs SH coefficients (6, 15, 28, 45, 66, 91, ... "
                              "volumes), it has %d",
                              mpath, map.nt);
            goto done;
        }
        if (glyphs || auto_glyphs) {
            if ((rc = dm_render_fod_glyphs(&map, (int)zoom, &pic)) != 0) goto done;
            rc = dm_png_write(out, pic.width, pic.height, pic.channels, pic.pixels);
            goto done;
        }
        if (volume >= map.nt) {
            rc = dm_set_error("%s: --volume %ld, but the map has %d volume%s", mpath, volume,
                              map.nt, map.nt == 1 ? "" : "s");
            goto done;
        }
        s.scalar = &map;
        s.volume = (int)volume;
        const char *win = dm_arg(&a, view_opts, "window");
        if (win) {
            if (parse_window(win, &s.lo, &s.hi) != 0) {
                rc = dm_set_error("--window: '%s' is not LO,HI with LO < HI", win);
                goto done;
            }
            s.window = 1;
        }
    }
    s.zoom = (int)zoom;
    if ((rc = dm_render_slices(&s, &pic)) != 0) goto done;
    rc = dm_png_write(out, pic.width, pic.height, pic.channels, pic.pixels);
done:
    dm_picture_free(&pic);
    dm_volume_free(&map);
    dm_volume_free(&dyads);
    dm_volume_free(&weight);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
