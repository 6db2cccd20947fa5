/* The public API's simulation (include/dimoc.h, dimoc_simulate): the caller's arrays handed to
 * the engine of `dimoc simulate` (simulate/simulate.h), the image kept in memory. */
#include "api/api_common.h"
#include "simulate/simulate.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static dimoc_status check_options(const dimoc_simulate_options *o, dm_simulate_inputs *in)
{
    const char *noise = o->noise ? o->noise : "none";
    in->noise = !strcmp(noise, "none")       ? DM_SIM_NOISE_NONE
                : !strcmp(noise, "gaussian") ? DM_SIM_NOISE_GAUSSIAN
                : !strcmp(noise, "rician")   ? DM_SIM_NOISE_RICIAN
                                             : -1;
    if (in->noise < 0)
        return dm_api_fail(DIMOC_E_ARGUMENT, "noise: '%s' is not none, gaussian or rician", noise);
    if (in->noise != DM_SIM_NOISE_NONE && !(o->snr > 0 && o->snr < 1e300))
        return dm_api_fail(DIMOC_E_ARGUMENT, "snr: %g; noise needs a finite snr > 0", o->snr);
    if (o->seed > 0x7fffffffffffffffULL)
        return dm_api_fail(DIMOC_E_ARGUMENT, "seed: %llu is above 2^63 - 1", o->seed);
    if (o->voxels < 1 || o->voxels > 100000000)
        return dm_api_fail(DIMOC_E_ARGUMENT, "voxels: %ld is outside 1..100000000", o->voxels);
    if (o->threads < 0 || o->threads > 4096)
        return dm_api_fail(DIMOC_E_ARGUMENT, "threads: %d is outside 0..4096", o->threads);
    if (o->out_type && strcmp(o->out_type, "float32") && strcmp(o->out_type, "float64"))
        return dm_api_fail(DIMOC_E_ARGUMENT, "out_type: '%s' is not float32 or float64",
                           o->out_type);
    in->snr = o->snr;
    in->seed = o->seed;
    return DIMOC_OK;
}

/* The grid: the first map's among the parameters and per-voxel inputs, else voxels x 1 x 1. */
static void grid_of(const dm_simulate_inputs *in, long voxels, size_t grid[3])
{
    grid[0] = (size_t)voxels, grid[1] = grid[2] = 1;
    for (int i = 0; i < in->params.n + in->voxel.n; i++) {
        const dm_array *a =
            i < in->params.n ? &in->params.item[i].map : &in->voxel.item[i - in->params.n].map;
        if (a->ndim >= 3) {
            for (int k = 0; k < 3; k++) grid[k] = a->shape[k];
            return;
        }
    }
}

static dimoc_status make_inputs(const dimoc_simulate_input *input, long voxels,
                                dm_simulate_inputs *in)
{
    in->params_option = "params";
    in->voxel_option = "voxel_inputs";
    in->mask_name = "mask";
    dimoc_status rc = dm_api_items(input->params, input->nparams, "params", &in->params);
    if (rc == DIMOC_OK)
        rc = dm_api_items(input->voxel_inputs, input->nvoxel_inputs, "voxel_inputs", &in->voxel);
    if (rc != DIMOC_OK) return rc;
    size_t grid[3];
    grid_of(in, voxels, grid);
    in->nx = grid[0], in->ny = grid[1], in->nz = grid[2];
    if (input->mask.data) {
        if (dm_api_array(&input->mask, &in->mask) != 0 || input->mask.ndim != 3)
            return dm_api_fail(DIMOC_E_ARGUMENT, "mask: expected 3 dimensions (X x Y x Z) of "
                                                 "uint8, float32 or float64 values");
    }
    const int M = input->volumes;
    if (M < 1 || M > 1000000)
        return dm_api_fail(DIMOC_E_ARGUMENT,
                           "volumes: %d; the protocol's measurements (1 or more) "
                           "are needed",
                           M);
    in->M = M;
    if (!input->bvals != !input->bvecs)
        return dm_api_fail(DIMOC_E_ARGUMENT, "%s: given without %s",
                           input->bvals ? "bvals" : "bvecs", input->bvals ? "bvecs" : "bvals");
    if (input->bvals) {
        if ((rc = dm_api_check_table(input->bvals, input->bvecs, M)) != DIMOC_OK) return rc;
        in->protocol.b = input->bvals, in->protocol.g = input->bvecs;
        in->protocol.b_name = "bvals", in->protocol.g_name = "bvecs";
    }
    in->protocol.measure_option = "measures";
    return dm_api_items(input->measures, input->nmeasures, "measures", &in->protocol.measures);
}

/* The command's provenance of this call: its inputs by the record's names, its options. */
static char *provenance(const dm_model_info *mi, const dm_simulate_inputs *in,
                        const dimoc_simulate_options *o, const dm_simulation *sim)
{
    dm_provenance prov;
    dm_provenance_begin(&prov, "simulate");
    prov.command_line = "dimoc_simulate";
    /* params and voxel_inputs as the command's NAME=VALUE lists (a map: "(a map)"), the
     * measures by their names */
    char text[4096];
    const dm_fit_items *lists[3] = {&in->params, &in->voxel, &in->protocol.measures};
    const char *keys[3] = {"params", "voxel_inputs", "measures"};
    for (int l = 0; l < 3; l++) {
        size_t n = 0;
        text[0] = 0;
        for (int i = 0; i < lists[l]->n && n < sizeof text; i++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s%s%s", i ? "," : "",
                                  lists[l]->item[i].name, l < 2 ? "=" : "",
                                  l < 2 ? lists[l]->item[i].text : "");
        if (lists[l]->n) dm_provenance_str(&prov, DM_PROV_INPUT, keys[l], text);
    }
    if (in->protocol.b) {
        dm_provenance_str(&prov, DM_PROV_INPUT, "bvals", "bvals");
        dm_provenance_str(&prov, DM_PROV_INPUT, "bvecs", "bvecs");
    }
    if (in->mask.data) dm_provenance_str(&prov, DM_PROV_INPUT, "mask", "mask");
    dm_provenance_str(&prov, DM_PROV_OPTION, "noise", o->noise ? o->noise : "none");
    dm_provenance_num(&prov, DM_PROV_OPTION, "snr", o->snr);
    dm_provenance_num(&prov, DM_PROV_OPTION, "seed", (double)o->seed);
    dm_provenance_num(&prov, DM_PROV_OPTION, "voxels", (double)o->voxels);
    dm_simulate_provenance(&prov, mi, sim);
    char *json = dm_provenance_text(&prov);
    dm_provenance_free(&prov);
    return json;
}

/* The status of a failed run. */
static dimoc_status failure(const dm_fit_watch *w)
{
    if (dm_watch_cancelled(&w->base))
        return dm_api_fail(DIMOC_E_CANCELLED, "dimoc_simulate: cancelled");
    if (strstr(dm_last_error(), "out of memory")) return dm_api_fail_words(DIMOC_E_MEMORY);
    const char *stage = w->base.stage ? w->base.stage : "";
    return dm_api_fail_words(!strcmp(stage, "compile") ? DIMOC_E_IO : DIMOC_E_ARGUMENT);
}

dimoc_status dimoc_simulate(const dimoc_model *model, const dimoc_simulate_input *input,
                            const dimoc_simulate_options *options, const dimoc_context *context,
                            dimoc_result **result)
{
    if (result) *result = NULL;
    if (!result) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_simulate: result is NULL");
    if (!input) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_simulate: input is NULL");
    const dm_model_info *mi = dm_api_model_info(model, "dimoc_simulate");
    if (!mi) return dimoc_last_error()->code;
    dimoc_simulate_input in_rec = DIMOC_SIMULATE_INPUT_INIT;
    dimoc_simulate_options opt = DIMOC_SIMULATE_OPTIONS_INIT;
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    if (dm_api_take_record(&in_rec, sizeof in_rec, input) != 0 ||
        (options && dm_api_take_record(&opt, sizeof opt, options) != 0) ||
        (context && dm_api_take_record(&ctx, sizeof ctx, context) != 0))
        return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_simulate: a record's size is not set (use "
                                             "DIMOC_SIMULATE_INPUT_INIT, "
                                             "DIMOC_SIMULATE_OPTIONS_INIT, DIMOC_CONTEXT_INIT)");
    dm_simulate_inputs in;
    memset(&in, 0, sizeof in);
    dm_simulation sim = {0};
    dimoc_result *res = NULL;
    dimoc_status rc = check_options(&opt, &in);
    if (rc == DIMOC_OK) rc = make_inputs(&in_rec, opt.voxels, &in);
    if (rc == DIMOC_OK && !(res = dm_api_result_new())) rc = DIMOC_E_MEMORY;
    if (rc == DIMOC_OK) {
        dm_fit_watch watch;
        dm_fit_watch_init(&watch, ctx.progress, ctx.cancel, ctx.user);
        int threads = omp_get_max_threads();
        if (opt.threads > 0) omp_set_num_threads(opt.threads);
        dm_warn_capture(dm_api_keep_line, dm_api_result_warnings(res));
        int run = dm_simulate(mi, &in, &watch, &sim);
        dm_warn_capture(NULL, NULL);
        omp_set_num_threads(threads);
        rc = run != 0 ? failure(&watch) : DIMOC_OK;
    }
    if (rc == DIMOC_OK) {
        const size_t grid[3] = {in.nx, in.ny, in.nz};
        int f64 = opt.out_type && !strcmp(opt.out_type, "float64");
        rc = dm_api_result_add_map(res, "signal", "map", sim.signal, grid, (size_t)sim.M,
                                   f64 ? DIMOC_FLOAT64 : DIMOC_FLOAT32);
        size_t shape[3] = {in.nx, in.ny, in.nz};
        unsigned char *mask = sim.mask; /* the result's now */
        sim.mask = NULL;
        if (rc == DIMOC_OK)
            rc = dm_api_result_add(res, "mask", "mask", DIMOC_UINT8, 3, shape, 1, mask);
        else
            free(mask);
        if (rc == DIMOC_OK) dm_api_result_set_provenance(res, provenance(mi, &in, &opt, &sim));
    }
    dm_simulation_free(&sim);
    free(in.params.item); /* the items point into the caller's arrays */
    free(in.voxel.item);
    free(in.protocol.measures.item);
    return dm_api_result_return(res, rc, result);
}
