/* provenance.json: what was fitted, how, on what, and how long it took. */
#define _GNU_SOURCE /* open_memstream */
#include "util/error.h"
#include "fit/fit_outputs.h"
#include "util/fsutil.h"
#include "util/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef DIMOC_VERSION
#define DIMOC_VERSION "unknown"
#endif

/* The JSON onto f. */
static void write_json(FILE *f, const dm_fit_request *r, const dm_problem *p, const char *device,
                       int real_size, const dm_fit_timing *t, const dm_fit_stage_info *stage)
{
    long counts[DM_NSTATUS] = {0};
    for (size_t v = 0; v < p->nvox; v++)
        if (p->status[v] < DM_NSTATUS) counts[p->status[v]]++;
    char when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    dm_json j;
    dm_json_begin(&j, f);
    dm_json_str(&j, "dimoc_version", DIMOC_VERSION);
    dm_json_str(&j, "created", when);
    dm_json_str(&j, "command", r->command_line ? r->command_line : "");
    dm_json_key_object(&j, "model");
    dm_json_str(&j, "name", p->mi.name);
    dm_json_str(&j, "given_as", r->model);
    dm_json_str(&j, "source_hash", p->mi.source_hash);
    dm_json_str(&j, "code_hash", p->mi.code_hash);
    dm_json_int(&j, "flops_signal", p->mi.flops_signal);
    dm_json_int(&j, "flops_gradient", p->mi.flops_gradient);
    dm_json_close(&j);
    dm_json_key_object(&j, "inputs");
    dm_json_str(&j, "data", r->data);
    dm_json_str(&j, "mask", r->mask ? r->mask : "");
    dm_json_str(&j, "bvals", r->bvals ? r->bvals : "");
    dm_json_str(&j, "bvecs", r->bvecs ? r->bvecs : "");
    dm_json_int(&j, "measurements", p->M);
    dm_json_close(&j);
    dm_json_key_object(&j, "options");
    dm_json_str(&j, "method", r->methods);
    dm_json_str(&j, "grid", r->grid ? r->grid : "");
    dm_json_str(&j, "fixed", r->fixed ? r->fixed : "");
    dm_json_str(&j, "init", r->init ? r->init : "");
    dm_json_str(&j, "init_from", r->init_from ? r->init_from : "");
    dm_json_str(&j, "voxel", r->voxel ? r->voxel : "");
    dm_json_str(&j, "measure", r->measure ? r->measure : "");
    dm_json_str(&j, "scheme", r->scheme ? r->scheme : "");
    dm_json_str(&j, "noise", r->noise);
    dm_json_int(&j, "burnin", r->burnin);
    dm_json_int(&j, "jumps", r->jumps);
    dm_json_int(&j, "sample_every", r->sample_every);
    dm_json_int(&j, "update_every", r->update_every);
    dm_json_int(&j, "lm_iterations", r->lm_iterations);
    dm_json_int(&j, "seed", (long long)r->seed);
    dm_json_bool(&j, "save_samples", r->save_samples);
    if (r->samples_of) dm_json_str(&j, "samples_of", r->samples_of);
    dm_json_bool(&j, "predicted", r->predicted);
    dm_json_bool(&j, "ic", r->ic);
    dm_json_str(&j, "precision", real_size == 4 ? "float" : "double");
    dm_json_int(&j, "threads", r->threads);
    if (r->part.n > 0) {
        char part[32];
        snprintf(part, sizeof part, "%d/%d", r->part.k, r->part.n);
        dm_json_str(&j, "part", part);
    }
    dm_json_close(&j);
    if (stage->nstages > 1) {
        /* One stage of a cascade: its own options and timings above; its inputs came in memory
         * from the stage before (the same values as --init-from that folder would read). */
        dm_json_key_object(&j, "cascade");
        dm_json_int(&j, "stage", stage->stage + 1);
        dm_json_int(&j, "stages", stage->nstages);
        dm_json_str(&j, "started_from", stage->previous ? stage->previous : "");
        dm_json_close(&j);
    }
    dm_json_str(&j, "device", device);
    dm_json_key_object(&j, "timings_seconds");
    dm_json_num(&j, "load", t->load);
    dm_json_num(&j, "compile", t->compile);
    dm_json_num(&j, "gpu_start", t->gpu_start);
    dm_json_num(&j, "fit", t->fit);
    dm_json_num(&j, "starts_wait", t->starts_wait);
    dm_json_num(&j, "starts", t->starts);
    dm_json_num(&j, "write", t->write);
    dm_json_num(&j, "total", t->total);
    dm_json_close(&j);
    dm_json_key_object(&j, "work");
    dm_json_num(&j, "signal_evaluations", t->signal_evals);
    dm_json_num(&j, "gradient_evaluations", t->gradient_evals);
    dm_json_num(&j, "gflop", t->gflop);
    dm_json_num(&j, "gflop_per_second", t->fit > 0 ? t->gflop / t->fit : 0);
    dm_json_close(&j);
    dm_json_key_object(&j, "voxels");
    dm_json_int(&j, "grid", (long long)p->nvox);
    dm_json_int(&j, "in_mask", (long long)p->nfit);
    dm_json_int(&j, "fitted", counts[1]);
    dm_json_int(&j, "not_converged", counts[2]);
    dm_json_int(&j, "skipped_nonfinite", counts[3]);
    dm_json_int(&j, "skipped_zero", counts[4]);
    dm_json_int(&j, "failed", counts[5]);
    dm_json_int(&j, "at_bound", counts[6]);
    dm_json_num(&j, "per_second", t->fit > 0 ? p->nfit / t->fit : 0);
    dm_json_close(&j);
    dm_json_end(&j);
}

int dm_fit_write_provenance(const dm_fit_request *r, const char *dir, const dm_problem *p,
                            const char *device, int real_size, const dm_fit_timing *t,
                            const dm_fit_stage_info *stage)
{
    char *path = dm_path_join(dir, "provenance.json");
    char *tmp = dm_temp_sibling(path);
    errno = 0;
    FILE *f = tmp ? fopen(tmp, "w") : NULL;
    if (!f) {
        dm_set_error("%s: cannot write: %s", path, strerror(errno ? errno : ENOMEM));
        free(path);
        free(tmp);
        return -1;
    }
    write_json(f, r, p, device, real_size, t, stage);
    int rc = dm_commit_written(f, 0, tmp, path);
    free(path);
    free(tmp);
    return rc;
}

int dm_fit_provenance_text(const dm_fit_request *r, const dm_problem *p, const char *device,
                           int real_size, const dm_fit_timing *t, const dm_fit_stage_info *stage,
                           char **text)
{
    size_t size = 0;
    *text = NULL;
    FILE *f = open_memstream(text, &size);
    if (!f) return dm_set_error("out of memory for the provenance");
    write_json(f, r, p, device, real_size, t, stage);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || !*text) {
        free(*text);
        *text = NULL;
        return dm_set_error("out of memory for the provenance");
    }
    return 0;
}
