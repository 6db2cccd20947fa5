#include "fodtrack/fodtrack_run.h"

#include "fodtrack/fodtrack_cpu.h"
#include "fodtrack/fodtrack_gpu.h"
#include "util/error.h"
#include "util/interrupt.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const end_names[DM_FT_NEND] = {
    "continue",       "exit_image",    "exit_mask",     "calibrator",           "model",
    "high_curvature", "length_exceed", "enter_exclude", "traverse_all_include", "enter_cgm",
    "enter_csf",      "exit_sgm",      "term_in_sgm"};
static const char *const verdict_names[DM_FT_NVERDICT] = {
    "accepted",      "seed_rejected",  "no_propagation",       "too_short",
    "enter_exclude", "missed_include", "act_poor_termination", "act_sgm_seed_never_in_wm",
    "too_long"};

int dm_ft_run_open(dm_ft_run *r, const dm_fodtrack_options *o, const dm_ft_inputs *in)
{
    memset(r, 0, sizeof *r);
    double t0 = dm_now_seconds();
    r->threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    r->use_double = o->use_double;
    r->part = o->part;
    if (dm_ft_plan_build(o, in, &r->plan) != 0) return -1;
    r->seconds_load = dm_now_seconds() - t0;
    r->next_id = r->plan.id_first;
    if (o->use_gpu) {
        double tc = dm_now_seconds();
        r->gpu = dm_ft_gpu_open(&r->plan, o->use_double, o->gpus, o->gpu_memory_mb);
        if (!r->gpu) return -1;
        r->seconds_compile = dm_now_seconds() - tc;
    }
    return 0;
}

void dm_ft_run_close(dm_ft_run *r)
{
    if (r->gpu) dm_ft_gpu_close(r->gpu);
    dm_ft_plan_free(&r->plan);
    memset(r, 0, sizeof *r);
}

/* The next batch, from id `from` (ids before it taken or under way, `ahead` of them under
 * way): enough ids to reach --select at the acceptance rate seen so far (with a margin), at
 * least `least`, at most `most` and the seeds left; 0 when the ids under way should suffice. */
static long next_batch(const dm_ft_run *r, unsigned long long from, long ahead, long least,
                       long most)
{
    const dm_ft_plan *p = &r->plan;
    double want = (double)most;
    if (p->select) {
        unsigned long long done = r->next_id - p->id_first;
        double rate = done ? (double)r->kept / (double)done : 0;
        double left = (double)(p->select - r->kept);
        if (rate > 0) {
            left -= 0.9 * rate * (double)ahead;
            if (left <= 0 && ahead > 0) return 0;
            want = 1.1 * left / rate + least / 4;
        } else if (ahead > 0) { /* no rate yet: a second batch only if the first cannot do */
            if (left <= (double)ahead) return 0;
            want = (double)least;
        } else {
            want = (double)least;
        }
    }
    long n = want < least ? least : want > most ? most : (long)want;
    if (from + (unsigned long long)n > p->id_end)
        n = from < p->id_end ? (long)(p->id_end - from) : 0;
    return n;
}

static double polyline_length(const float *xyz, int n)
{
    double len = 0;
    for (int i = 1; i < n; i++) {
        double dx = xyz[3 * i] - xyz[3 * i - 3], dy = xyz[3 * i + 1] - xyz[3 * i - 2],
               dz = xyz[3 * i + 2] - xyz[3 * i - 1];
        len += sqrt(dx * dx + dy * dy + dz * dz);
    }
    return len;
}

/* Takes the batch's streamlines in id order until --select is reached (*taken of them) and
 * counts the ids up to the last one taken.  Returns 1 when the run is complete. */
static int take_batch(dm_ft_run *r, const dm_ft_batch *b, long *taken)
{
    const dm_ft_plan *p = &r->plan;
    long upto = b->n; /* ids of the batch that count */
    long i = 0;
    for (; i < b->count; i++) {
        if (p->select && r->kept == p->select) {
            upto = (long)(b->id[i] - b->first);
            break;
        }
        r->kept++;
    }
    if (p->select && r->kept == p->select && i == b->count && b->count > 0)
        upto = (long)(b->id[b->count - 1] - b->first) + 1;
    *taken = i;
    for (long k = 0; k < upto; k++) {
        r->verdicts[b->verdict[k]]++;
        if (b->verdict[k] != DM_FT_REJECT_SEED) r->total_count++;
        r->ends[b->ends[2 * k]]++;
        r->ends[b->ends[2 * k + 1]]++;
    }
    r->next_id = b->first + (unsigned long long)upto;
    r->truncations += b->truncations; /* of the whole batch: statistics only */
    r->evals += b->evals;
    return (p->select && r->kept == p->select) || r->next_id >= p->id_end;
}

/* The points and lengths of the first `taken` streamlines of b into the counts: lengths in
 * parallel, summed in order (the same sum whatever the threads). */
static int count_lengths(dm_ft_run *r, const dm_ft_batch *b, long taken)
{
    if (taken <= 0) return 0;
    double *len = malloc((size_t)taken * sizeof *len);
    if (!len) return dm_set_error("track: out of memory");
#pragma omp parallel for schedule(static) num_threads(r->threads)
    for (long i = 0; i < taken; i++) len[i] = polyline_length(b->xyz + 3 * b->start[i], b->npts[i]);
    for (long i = 0; i < taken; i++) {
        r->points += (unsigned long long)b->npts[i];
        r->length_sum += len[i];
    }
    free(len);
    return 0;
}

/* The fraction of the run done, for a caller's progress. */
static double fraction_done(const dm_ft_run *r)
{
    const dm_ft_plan *p = &r->plan;
    if (p->select) return (double)r->kept / (double)p->select;
    unsigned long long n = p->id_end - p->id_first;
    return n ? (double)(r->next_id - p->id_first) / (double)n : 1;
}

int dm_ft_run_track(dm_ft_run *r, const dm_ft_sink *sink, dm_progress *bar, dm_watch *watch)
{
    const dm_ft_plan *plan = &r->plan;
    dm_ft_batch batches[2] = {{0}, {0}}; /* the sink reads one while the other is filled */
    int rc = -1, cur = 0, threads = r->threads;
    dm_ft_gpu *gpu = r->gpu;
    double t_track = dm_now_seconds(), t_kernel = 0;
    dm_watch_report(watch, "track", 0);
    /* GPU batches of 2-4 streamlines per resident thread: small enough that the last batch's
     * write (what the tracing cannot hide) stays short, and two in flight hide each kernel's
     * tail, when its last long streamlines leave most lanes idle */
    long least = gpu ? 2 * dm_ft_gpu_threads(gpu) : 256L * threads;
    long most = gpu ? 4 * dm_ft_gpu_threads(gpu) : 4096L * threads;
    if (gpu && most > dm_ft_gpu_max_batch(gpu)) most = dm_ft_gpu_max_batch(gpu);
    if (least > most) least = most;
    unsigned long long planned = r->next_id; /* ids handed to the GPU */
    for (int complete = 0; !complete; cur ^= 1) {
        dm_ft_batch *batch = &batches[cur];
        if (sink->wait) sink->wait(sink->user, cur); /* its points are about to be replaced */
        double tk = dm_now_seconds();
        if (gpu) {
            /* keep two batches under way while more may be needed */
            while (dm_ft_gpu_pending(gpu) < 2) {
                long ahead = (long)(planned - r->next_id);
                long n = next_batch(r, planned, ahead, least, most);
                if (n <= 0) break;
                if (dm_ft_gpu_submit(gpu, planned, n) != 0) goto done;
                planned += (unsigned long long)n;
            }
            if (!dm_ft_gpu_pending(gpu)) break;
            if (dm_ft_gpu_collect(gpu, batch, threads) != 0) goto done;
        } else {
            long n = next_batch(r, r->next_id, 0, least, most);
            if (n <= 0) break;
            int traced = dm_ft_cpu_batch(&plan->ctx, r->use_double, plan->buf_points, r->next_id,
                                         n, threads, watch, batch);
            if (traced == -2) goto done;
            if (traced != 0) { /* stopped midway: not taken */
                if (dm_watch_cancelled(watch)) {
                    dm_watch_stop_error(watch);
                    goto done;
                }
                dm_stop_take();
                r->interrupted = 1;
                break;
            }
        }
        t_kernel += dm_now_seconds() - tk;
        unsigned long long before = plan->select ? r->kept : r->next_id;
        long taken = 0;
        complete = take_batch(r, batch, &taken);
        if (count_lengths(r, batch, taken) != 0 || sink->add(sink->user, cur, batch, taken) != 0)
            goto done;
        dm_progress_add(bar, (long)((plan->select ? r->kept : r->next_id) - before));
        dm_watch_report(watch, "track", fraction_done(r));
        if (dm_watch_stopping(watch) && dm_watch_cancelled(watch)) {
            dm_watch_stop_error(watch);
            goto done;
        }
        if (dm_stop_take()) {
            r->interrupted = 1;
            break;
        }
    }
    dm_watch_report(watch, "track", 1);
    rc = 0;
done:
    if (sink->wait) { /* the sink done with both batches before they go */
        sink->wait(sink->user, 0);
        sink->wait(sink->user, 1);
    }
    r->seconds_track = dm_now_seconds() - t_track;
    r->seconds_tracing = t_kernel;
    dm_ft_batch_free(&batches[0]);
    dm_ft_batch_free(&batches[1]);
    return rc;
}

void dm_ft_run_provenance(const dm_ft_run *r, dm_provenance *prov)
{
    const dm_ft_plan *plan = &r->plan;
    const dm_ft_ctx *c = &plan->ctx;
    dm_provenance_str(prov, DM_PROV_RESULT, "algorithm", plan->method);
    dm_provenance_str(prov, DM_PROV_RESULT, "device", r->gpu ? dm_ft_gpu_device(r->gpu) : "cpu");
    dm_provenance_str(prov, DM_PROV_RESULT, "precision", r->use_double ? "double" : "float");
    dm_provenance_num(prov, DM_PROV_RESULT, "step_mm", c->step);
    dm_provenance_num(prov, DM_PROV_RESULT, "max_angle_deg",
                      acos(c->cos_max_angle) * 180 / 3.14159265358979323846);
    dm_provenance_num(prov, DM_PROV_RESULT, "cutoff", c->threshold);
    dm_provenance_num(prov, DM_PROV_RESULT, "min_length_mm", c->min_dist);
    dm_provenance_num(prov, DM_PROV_RESULT, "max_length_mm", c->max_dist);
    dm_provenance_num(prov, DM_PROV_RESULT, "calibration_directions", c->ncalib);
    dm_provenance_num(prov, DM_PROV_RESULT, "calibration_ratio", c->calib_ratio);
    dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)r->kept);
    dm_provenance_num(prov, DM_PROV_RESULT, "seeds", (double)(r->next_id - plan->id_first));
    if (r->part.n > 0) {
        dm_provenance_num(prov, DM_PROV_RESULT, "part", r->part.k);
        dm_provenance_num(prov, DM_PROV_RESULT, "parts", r->part.n);
        dm_provenance_num(prov, DM_PROV_RESULT, "seed_id_first", (double)plan->id_first);
        dm_provenance_num(prov, DM_PROV_RESULT, "seed_id_end", (double)plan->id_end);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "total_count", (double)r->total_count);
    dm_provenance_num(prov, DM_PROV_RESULT, "mean_length_mm",
                      r->kept ? r->length_sum / (double)r->kept : 0);
    dm_provenance_num(prov, DM_PROV_RESULT, "interrupted", r->interrupted);
    for (int v = 0; v < DM_FT_NVERDICT; v++) {
        char key[64];
        snprintf(key, sizeof key, "streamlines_%s", verdict_names[v]);
        dm_provenance_num(prov, DM_PROV_RESULT, key, (double)r->verdicts[v]);
    }
    for (int e = 1; e < DM_FT_NEND; e++) {
        char key[64];
        snprintf(key, sizeof key, "halves_ended_%s", end_names[e]);
        dm_provenance_num(prov, DM_PROV_RESULT, key, (double)r->ends[e]);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "proposals_above_envelope", (double)r->truncations);
    dm_provenance_num(prov, DM_PROV_RESULT, "fod_amplitudes_evaluated", (double)r->evals);
    dm_provenance_num(prov, DM_PROV_RESULT, "points", (double)r->points);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_load", r->seconds_load);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_compile", r->seconds_compile);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_track", r->seconds_track);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_tracing", r->seconds_tracing);
    if (r->gpu) {
        const dm_ft_gpu_times *gt = dm_ft_gpu_timing(r->gpu);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_upload", gt->upload);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_wait", gt->wait);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_download", gt->download);
    }
}
