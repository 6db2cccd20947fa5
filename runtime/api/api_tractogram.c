/* The public API's calls over streamlines (include/dimoc.h): dimoc_tdi and dimoc_connectome,
 * the caller's streamlines and images handed to the engines of `dimoc tdi` and `dimoc
 * connectome` (fodtrack/tdi.h, fodtrack/connectome.h), their maps kept in memory. */
#include "api/api_common.h"
#include "api/api_track.h"
#include "fodtrack/connectome.h"
#include "fodtrack/tdi.h"
#include "util/error.h"
#include "util/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The status of a failed engine: a cancel, no memory, or what the inputs made it refuse. */
static dimoc_status failure(const dm_watch *w, const char *fn)
{
    if (dm_watch_cancelled(w)) return dm_api_fail(DIMOC_E_CANCELLED, "%s: cancelled", fn);
    if (strstr(dm_last_error(), "out of memory")) return dm_api_fail_words(DIMOC_E_MEMORY);
    return dm_api_fail_words(DIMOC_E_ARGUMENT);
}

/* The call's provenance: its inputs by their fields' names, the engine's results. */
static dimoc_status set_provenance(dimoc_result *res, dm_provenance *prov)
{
    char *text = dm_provenance_text(prov);
    dm_provenance_free(prov);
    if (!text) return dm_api_fail(DIMOC_E_MEMORY, "out of memory for the provenance");
    dm_api_result_set_provenance(res, text);
    return DIMOC_OK;
}

dimoc_status dimoc_tdi(const dimoc_tdi_input *input, const dimoc_tdi_options *options,
                       const dimoc_context *context, dimoc_result **result)
{
    if (result) *result = NULL;
    if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_tdi: result is NULL");
    if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_tdi: input is NULL");
    dimoc_tdi_input in = DIMOC_TDI_INPUT_INIT;
    dimoc_tdi_options opt = DIMOC_TDI_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    if (dm_api_take_record(&in, sizeof in, input) != 0 ||
        (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||
        (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_tdi: a record's size is not set (use "
                                             "DIMOC_TDI_INPUT_INIT, DIMOC_TDI_OPTIONS_INIT, "
                                             "DIMOC_CONTEXT_INIT)");
    /* the template: its grid alone */
    dimoc_image templ = {{&in, DIMOC_UINT8, 3, {in.shape[0], in.shape[1], in.shape[2]}, {0}},
                         in.affine, in.voxel_size};
    dm_image_view grid;
    dimoc_status rc = dm_api_image(&templ, "template", 1, NULL, &grid);
    int super = opt.voxel[0] != 0 || opt.voxel[1] != 0 || opt.voxel[2] != 0;
    for (int k = 0; k < 3 && rc == DIMOC_OK && super; k++)
        if (!(opt.voxel[k] > 0) || !isfinite(opt.voxel[k]))
            rc = dm_api_fail(DIMOC_E_ARGUMENT, "voxel: %g; three sizes > 0 in mm (0 0 0: the "
                                               "template's grid)",
                             opt.voxel[k]);
    if (rc == DIMOC_OK && (opt.threads < 0 || opt.threads > 4096))
        rc = dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", opt.threads);
    if (rc == DIMOC_OK && !(in.step_size >= 0 || isnan(in.step_size)))
        rc = dm_api_fail(DIMOC_E_ARGUMENT, "step_size: %g; a step > 0 in mm (0: none)",
                         in.step_size);
    dm_tck tracks;
    memset(&tracks, 0, sizeof tracks);
    if (rc == DIMOC_OK) rc = dm_api_tracks(&in.streamlines, in.weights, "streamlines", &tracks);
    if (rc != DIMOC_OK) return rc;
    dimoc_result *res = dm_api_result_new();
    if (!res) {
        dm_api_tracks_free(&tracks);
        return DIMOC_E_MEMORY;
    }
    dm_watch watch;
    dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
    /* the step as a .tck header carries it ("%g") and tckmap reads it (a float) */
    char step_text[64];
    snprintf(step_text, sizeof step_text, "%g", in.step_size);
    dm_tdi_request rq = {.tracks = &tracks,
                         .weights = in.weights,
                         .n = {(int)in.shape[0], (int)in.shape[1], (int)in.shape[2]},
                         .v2w = grid.v2w,
                         .templ_name = "template",
                         .voxel_mm = super ? opt.voxel : NULL,
                         .exact = opt.exact != 0,
                         .step = in.step_size > 0 ? strtof(step_text, NULL) : NAN,
                         .threads = opt.threads,
                         .watch = &watch};
    memcpy(rq.pixdim, grid.voxel, sizeof rq.pixdim);
    dm_tdi map = {0};
    dm_tdi_summary sum;
    dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(res));
    int made = dm_tdi_make(&rq, &map, &sum);
    dm_warn_capture(NULL, NULL);
    dm_api_tracks_free(&tracks);
    if (made != 0) rc = failure(&watch, "dimoc_tdi");
    if (rc == DIMOC_OK) {
        size_t nvox = (size_t)map.nx * map.ny * map.nz;
        size_t shape[3] = {(size_t)map.nx, (size_t)map.ny, (size_t)map.nz};
        void *values = NULL;
        if (map.weighted) { /* float32, as the command writes the sums */
            float *f = malloc((nvox ? nvox : 1) * sizeof *f);
            for (size_t i = 0; f && i < nvox; i++) f[i] = (float)map.weighted[i];
            values = f;
        } else { /* the counts themselves */
            values = map.count;
            map.count = NULL;
        }
        if (!values)
            rc = dm_api_fail(DIMOC_E_MEMORY, "dimoc_tdi: out of memory");
        else
            rc = (dimoc_status)dm_api_result_add(res, "tdi", "map",
                                                 map.weighted ? DIMOC_FLOAT32 : DIMOC_UINT32, 3,
                                                 shape, 1, values);
        double *affine = malloc(16 * sizeof *affine);
        size_t four[2] = {4, 4};
        for (int i = 0; affine && i < 16; i++) affine[i] = map.vox2world.m[i / 4][i % 4];
        if (rc == DIMOC_OK && !affine)
            rc = dm_api_fail(DIMOC_E_MEMORY, "dimoc_tdi: out of memory");
        else if (rc == DIMOC_OK)
            rc = (dimoc_status)dm_api_result_add(res, "affine", "affine", DIMOC_FLOAT64, 2, four,
                                                 0, affine);
        else
            free(affine);
    }
    if (rc == DIMOC_OK) {
        dm_provenance prov;
        dm_provenance_begin(&prov, "tdi");
        prov.command_line = "dimoc_tdi";
        dm_provenance_str(&prov, DM_PROV_INPUT, "streamlines", "streamlines");
        if (in.weights) dm_provenance_str(&prov, DM_PROV_INPUT, "weights", "weights");
        if (super) {
            char text[100];
            snprintf(text, sizeof text, "%.17g,%.17g,%.17g", opt.voxel[0], opt.voxel[1],
                     opt.voxel[2]);
            dm_provenance_str(&prov, DM_PROV_OPTION, "voxel", text);
        }
        if (opt.exact) dm_provenance_num(&prov, DM_PROV_OPTION, "exact", 1);
        dm_tdi_provenance(&sum, opt.exact != 0, &prov);
        rc = set_provenance(res, &prov);
    }
    dm_tdi_free(&map);
    if (rc != DIMOC_OK) {
        dimoc_result_free(res);
        return rc;
    }
    *result = res;
    return DIMOC_OK;
}

/* A matrix of the connectome as its .csv file holds it: the upper triangle with the diagonal
 * (0 below); with `mean`, each value over the edge's count (0 where none). */
static double *csv_matrix(const dm_connectome *c, const double *values, int mean)
{
    size_t n = (size_t)c->nodes;
    double *m = calloc(n * n + 1, sizeof *m);
    for (size_t i = 0; m && i < n; i++)
        for (size_t j = i; j < n; j++) {
            size_t k = i * n + j;
            m[k] = !mean ? values[k] : c->count[k] > 0 ? values[k] / c->count[k] : 0;
        }
    return m;
}

dimoc_status dimoc_connectome(const dimoc_connectome_input *input,
                              const dimoc_connectome_options *options,
                              const dimoc_context *context, dimoc_result **result)
{
    if (result) *result = NULL;
    if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_connectome: result is NULL");
    if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_connectome: input is NULL");
    dimoc_connectome_input in = DIMOC_CONNECTOME_INPUT_INIT;
    dimoc_connectome_options opt = DIMOC_CONNECTOME_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    if (dm_api_take_record(&in, sizeof in, input) != 0 ||
        (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||
        (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_connectome: a record's size is not set (use "
                                             "DIMOC_CONNECTOME_INPUT_INIT, "
                                             "DIMOC_CONNECTOME_OPTIONS_INIT, DIMOC_CONTEXT_INIT)");
    if (opt.threads < 0 || opt.threads > 4096)
        return dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", opt.threads);
    dm_image_view view;
    dimoc_status rc = dm_api_image(&in.parcellation, "parcellation", 1, NULL, &view);
    dm_parcellation parc;
    memset(&parc, 0, sizeof parc);
    if (rc == DIMOC_OK && dm_parcellation_from(&view, &parc) != 0)
        rc = dm_api_fail_words(strstr(dm_last_error(), "out of memory") ? DIMOC_E_MEMORY
                                                                        : DIMOC_E_ARGUMENT);
    dm_tck tracks;
    memset(&tracks, 0, sizeof tracks);
    if (rc == DIMOC_OK) rc = dm_api_tracks(&in.streamlines, in.weights, "streamlines", &tracks);
    if (rc == DIMOC_OK && parc.max_label == 0)
        rc = dm_api_fail(DIMOC_E_ARGUMENT, "parcellation: no node labels (every voxel is 0)");
    dimoc_result *res = rc == DIMOC_OK ? dm_api_result_new() : NULL;
    if (rc == DIMOC_OK && !res) rc = DIMOC_E_MEMORY;
    dm_connectome c;
    memset(&c, 0, sizeof c);
    if (rc == DIMOC_OK) {
        dm_watch watch;
        dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(res));
        if (dm_connectome_make(&parc, "parcellation", &tracks, in.weights, opt.threads, &watch,
                               &c) != 0)
            rc = failure(&watch, "dimoc_connectome");
        dm_warn_capture(NULL, NULL);
    }
    dm_parcellation_free(&parc);
    dm_api_tracks_free(&tracks);
    const char *names[2] = {"connectome", "mean_length"};
    for (int k = 0; k < 2 && rc == DIMOC_OK; k++) {
        size_t shape[2] = {(size_t)c.nodes, (size_t)c.nodes};
        double *m = csv_matrix(&c, k ? c.length_sum : c.count, k);
        if (!m)
            rc = dm_api_fail(DIMOC_E_MEMORY, "dimoc_connectome: out of memory");
        else
            rc = (dimoc_status)dm_api_result_add(res, names[k], "matrix", DIMOC_FLOAT64, 2, shape,
                                                 0, m);
    }
    if (rc == DIMOC_OK) {
        dm_provenance prov;
        dm_provenance_begin(&prov, "connectome");
        prov.command_line = "dimoc_connectome";
        dm_provenance_str(&prov, DM_PROV_INPUT, "streamlines", "streamlines");
        dm_provenance_str(&prov, DM_PROV_INPUT, "parcellation", "parcellation");
        if (in.weights) dm_provenance_str(&prov, DM_PROV_INPUT, "weights", "weights");
        dm_connectome_provenance(&c, &prov);
        rc = set_provenance(res, &prov);
    }
    dm_connectome_free(&c);
    if (rc != DIMOC_OK) {
        dimoc_result_free(res);
        return rc;
    }
    *result = res;
    return DIMOC_OK;
}
