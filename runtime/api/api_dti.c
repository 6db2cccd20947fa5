/* The public API's tensor fit (include/dimoc.h, dimoc_dti): the caller's arrays handed to the
 * fit of `dimoc dti` (dti/dti_maps.h), its maps kept in memory by the names of its files. */
#include "api/api_common.h"
#include "dti/dti_maps.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The settings `dimoc dti` makes of its options (cli/cmd_dti.c). */
static dimoc_status settings_of(const dimoc_dti_options *o, dm_dti_settings *s)
{
    memset(s, 0, sizeof *s);
    const char *method = o->method ? o->method : "wls";
    if (strcmp(method, "wls") && strcmp(method, "ols"))
        return dm_api_fail(DIMOC_E_ARGUMENT, "method: '%s' is not wls or ols", method);
    s->weighted = !strcmp(method, "wls");
    if (o->iter < -1 || o->iter > 10)
        return dm_api_fail(DIMOC_E_ARGUMENT, "iter: %d is outside 0..10 (-1: not given)", o->iter);
    s->iterations = o->iter;
    if (!(o->min_signal >= 0) || isinf(o->min_signal))
        return dm_api_fail(DIMOC_E_ARGUMENT, "min_signal: %g; a positive number (0: the default)",
                           o->min_signal);
    s->min_signal = o->min_signal > 0 ? o->min_signal : DM_DTI_MIN_SIGNAL;
    /* dwi2tensor's floor, relative to the voxel, unless min_signal says otherwise */
    if (o->iter >= 0 && !(o->min_signal > 0)) s->min_signal_relative = 1e-6;
    const char *md = o->min_diffusivity ? o->min_diffusivity : "auto";
    char *end;
    s->min_diffusivity = NAN; /* auto */
    if (!strcmp(md, "none")) {
        s->min_diffusivity = -INFINITY;
    } else if (strcmp(md, "auto")) {
        s->min_diffusivity = strtod(md, &end);
        if (!*md || *end || !isfinite(s->min_diffusivity))
            return dm_api_fail(DIMOC_E_ARGUMENT,
                               "min_diffusivity: '%s' is not a number, auto or none", md);
    }
    if (o->threads < 0 || o->threads > 4096)
        return dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", o->threads);
    s->threads = o->threads;
    s->sse = o->sse != 0;
    if (o->out_type && strcmp(o->out_type, "float32") && strcmp(o->out_type, "float64"))
        return dm_api_fail(DIMOC_E_ARGUMENT, "out_type: '%s' is not float32 or float64",
                           o->out_type);
    return DIMOC_OK;
}

/* The command's provenance of this call: its inputs by the record's names, its options. */
static char *provenance(const dm_api_dwi *d, const dimoc_dti_options *o, const dm_dti_maps *m)
{
    dm_provenance prov;
    dm_provenance_begin(&prov, "dti");
    prov.command_line = "dimoc_dti";
    dm_provenance_str(&prov, DM_PROV_INPUT, "data", "data");
    dm_provenance_str(&prov, DM_PROV_INPUT, "mask", d->mask.data ? "mask" : NULL);
    dm_provenance_str(&prov, DM_PROV_INPUT, "table", d->table);
    dm_provenance_str(&prov, DM_PROV_OPTION, "method", o->method ? o->method : "wls");
    if (o->iter >= 0) dm_provenance_num(&prov, DM_PROV_OPTION, "iter", o->iter);
    if (o->min_signal > 0) dm_provenance_num(&prov, DM_PROV_OPTION, "min_signal", o->min_signal);
    dm_provenance_str(&prov, DM_PROV_OPTION, "min_diffusivity",
                      o->min_diffusivity ? o->min_diffusivity : "auto");
    dm_dti_provenance(&prov, m);
    char *json = dm_provenance_text(&prov);
    dm_provenance_free(&prov);
    return json;
}

dimoc_status dimoc_dti(const dimoc_dwi_input *input, const dimoc_dti_options *options,
                       const dimoc_context *context, dimoc_result **result)
{
    if (result) *result = NULL;
    if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_dti: result is NULL");
    if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_dti: input is NULL");
    dimoc_dwi_input in = DIMOC_DWI_INPUT_INIT;
    dimoc_dti_options opt = DIMOC_DTI_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    if (dm_api_take_record(&in, sizeof in, input) != 0 ||
        (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||
        (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_dti: a record's size is not set (use "
                                             "DIMOC_DWI_INPUT_INIT, DIMOC_DTI_OPTIONS_INIT, "
                                             "DIMOC_CONTEXT_INIT)");
    dm_api_dwi d;
    dm_dti_settings s;
    dm_dti_image im;
    memset(&im, 0, sizeof im);
    dm_dti_maps maps = {0};
    dimoc_result *res = NULL;
    dimoc_status rc = dm_api_dwi_take(&in, &d);
    if (rc == DIMOC_OK) rc = settings_of(&opt, &s);
    if (rc == DIMOC_OK &&
        dm_dti_image_build(&im, &d.data, d.mask.data ? &d.mask : NULL, d.b, d.g, d.table) != 0)
        rc = dm_api_fail_words(DIMOC_E_ARGUMENT);
    if (rc == DIMOC_OK && !(res = dm_api_result_new())) rc = DIMOC_E_MEMORY;
    if (rc == DIMOC_OK) {
        dm_watch watch;
        dm_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        int threads = omp_get_max_threads();
        dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(res));
        int run = dm_dti_maps_fit(&im, &s, &watch, &maps);
        dm_warn_capture(NULL, NULL);
        omp_set_num_threads(threads);
        if (run != 0)
            rc = dm_watch_cancelled(&watch) ? dm_api_fail(DIMOC_E_CANCELLED, "dimoc_dti: cancelled")
                 : strstr(dm_last_error(), "out of memory") ? dm_api_fail_words(DIMOC_E_MEMORY)
                                                            : dm_api_fail_words(DIMOC_E_ARGUMENT);
    }
    const size_t grid[3] = {d.data.shape[0], d.data.shape[1], d.data.shape[2]};
    const dimoc_dtype type =
        opt.out_type && !strcmp(opt.out_type, "float64") ? DIMOC_FLOAT64 : DIMOC_FLOAT32;
    for (int k = 0; k < DM_DTI_NMAPS && rc == DIMOC_OK; k++) {
        if ((k == DM_DTI_MAP_TENSOR && !opt.save_tensor) || (k == DM_DTI_MAP_SSE && !opt.sse))
            continue;
        rc = dm_api_result_add_map(res, dm_dti_map_names[k], "map", maps.map[k], grid,
                                   (size_t)dm_dti_map_volumes[k], type);
    }
    if (rc == DIMOC_OK) dm_api_result_set_provenance(res, provenance(&d, &opt, &maps));
    dm_dti_maps_free(&maps);
    dm_dti_image_free(&im);
    dm_api_dwi_free(&d);
    return dm_api_result_return(res, rc, result);
}
