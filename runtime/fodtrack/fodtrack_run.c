#include "fodtrack/fodtrack_run.h"

#include "fodtrack/fodtrack_batch.h"
#include "fodtrack/fodtrack_cpu.h"
#include "fodtrack/fodtrack_gpu.h"
#include "io/tck.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const end_names[DM_FT_NEND] = {
    "continue",     "exit_image",     "exit_mask",     "calibrator",
    "model",        "high_curvature", "length_exceed", "enter_exclude",
    "traverse_all_include"};
static const char *const verdict_names[DM_FT_NVERDICT] = {
    "accepted",      "seed_rejected",  "no_propagation",
    "too_short",     "enter_exclude",  "missed_include"};

/* Where the run stands. */
typedef struct {
    unsigned long long next_id;     /* ids [0, next_id) tracked */
    unsigned long long kept;        /* streamlines written */
    unsigned long long total_count; /* accepted + rejected streamlines (tckgen's total_count) */
    unsigned long long verdicts[DM_FT_NVERDICT];
    unsigned long long ends[DM_FT_NEND], truncations, points;
    double length_sum;
} progress_state;

/* The batch size: enough ids to reach --select at the acceptance rate seen so far (with a
 * margin), at least `least`, at most `most` and the seeds left. */
static long next_batch(const dm_ft_plan *p, const progress_state *st, long least, long most)
{
    double want = (double)most;
    if (p->select) {
        double rate = st->next_id ? (double)st->kept / (double)st->next_id : 0;
        double left = (double)(p->select - st->kept);
        want = rate > 0 ? 1.1 * left / rate + least / 4 : (double)least;
    }
    long n = want < least ? least : want > most ? most : (long)want;
    if (p->max_seeds && st->next_id + (unsigned long long)n > p->max_seeds)
        n = (long)(p->max_seeds - st->next_id);
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

/* Takes the batch's streamlines in id order until --select is reached: writes them, and counts
 * the ids up to the last one taken.  Returns 1 when the run is complete. */
static int take_batch(const dm_ft_plan *p, const dm_ft_batch *b, dm_tck_writer *w,
                      progress_state *st)
{
    long upto = b->n; /* ids of the batch that count */
    long i = 0;
    for (; i < b->count; i++) {
        if (p->select && st->kept == p->select) {
            upto = (long)(b->id[i] - b->first);
            break;
        }
        const float *xyz = b->xyz + 3 * b->start[i];
        dm_tck_add(w, xyz, b->npts[i]);
        st->kept++;
        st->points += (unsigned long long)b->npts[i];
        st->length_sum += polyline_length(xyz, b->npts[i]);
    }
    if (p->select && st->kept == p->select && i == b->count && b->count > 0)
        upto = (long)(b->id[b->count - 1] - b->first) + 1;
    for (long k = 0; k < upto; k++) {
        st->verdicts[b->verdict[k]]++;
        if (b->verdict[k] != DM_FT_REJECT_SEED) st->total_count++;
        st->ends[b->ends[2 * k]]++;
        st->ends[b->ends[2 * k + 1]]++;
    }
    st->next_id = b->first + (unsigned long long)upto;
    st->truncations += b->truncations; /* of the whole batch: a statistic only */
    return (p->select && st->kept == p->select) || (p->max_seeds && st->next_id >= p->max_seeds);
}

int dm_fodtrack_command(const dm_fodtrack_options *o, dm_provenance *prov)
{
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    int rc = -1;
    double t0 = now_seconds();
    dm_ft_plan plan;
    dm_ft_gpu *gpu = NULL;
    dm_outdir od = {0};
    dm_tck_writer *w = NULL;
    dm_ft_batch batch = {0};
    dm_progress *bar = NULL;
    char *header = NULL, *tck_path = NULL;
    progress_state st;
    memset(&st, 0, sizeof st);
    if (dm_ft_plan_build(o, &plan) != 0) goto done;
    double t_load = now_seconds() - t0, t_compile = 0;
    int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    if (o->use_gpu) {
        double tc = now_seconds();
        gpu = dm_ft_gpu_open(&plan, o->use_double, o->gpus, o->gpu_memory_mb);
        if (!gpu) goto done;
        t_compile = now_seconds() - tc;
    }
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    tck_path = dm_path_join(od.path, "tracks.tck");
    header = dm_ft_plan_header(&plan, o);
    w = dm_tck_open(tck_path, header);
    if (!w) goto done;

    bar = dm_progress_start("track", (long)(plan.select ? plan.select : plan.max_seeds),
                            plan.select ? "streamlines" : "seeds");
    double t_track = now_seconds(), t_kernel = 0;
    long least = gpu ? 4 * dm_ft_gpu_threads(gpu) : 256L * threads;
    long most = gpu ? dm_ft_gpu_max_batch(gpu) : 4096L * threads;
    if (least > most) least = most;
    int interrupted = 0;
    for (int complete = 0; !complete;) {
        long n = next_batch(&plan, &st, least, most);
        if (n <= 0) break;
        double tk = now_seconds();
        if (gpu) {
            if (dm_ft_gpu_batch(gpu, st.next_id, n, &batch) != 0) goto done;
        } else {
            dm_ft_cpu_batch(&plan.ctx, o->use_double, plan.buf_points, st.next_id, n, threads,
                            &batch);
        }
        t_kernel += now_seconds() - tk;
        unsigned long long before = plan.select ? st.kept : st.next_id;
        complete = take_batch(&plan, &batch, w, &st);
        dm_progress_add(bar, (long)((plan.select ? st.kept : st.next_id) - before));
        if (dm_stop_take()) {
            interrupted = 1;
            break;
        }
    }
    t_track = now_seconds() - t_track;
    if (bar) {
        char note[160];
        snprintf(note, sizeof note, "%llu streamlines from %llu seeds%s", st.kept, st.next_id,
                 interrupted ? " (interrupted)" : "");
        dm_progress_finish(bar, note);
        bar = NULL;
    }
    double t_write = now_seconds();
    int closed = dm_tck_close(w, st.total_count);
    w = NULL;
    if (closed != 0) goto done;

    dm_provenance_str(prov, DM_PROV_RESULT, "algorithm", plan.method);
    dm_provenance_str(prov, DM_PROV_RESULT, "device", gpu ? dm_ft_gpu_device(gpu) : "cpu");
    dm_provenance_str(prov, DM_PROV_RESULT, "precision", o->use_double ? "double" : "float");
    dm_provenance_num(prov, DM_PROV_RESULT, "step_mm", plan.ctx.step);
    dm_provenance_num(prov, DM_PROV_RESULT, "max_angle_deg",
                      acos(plan.ctx.cos_max_angle) * 180 / 3.14159265358979323846);
    dm_provenance_num(prov, DM_PROV_RESULT, "cutoff", plan.ctx.threshold);
    dm_provenance_num(prov, DM_PROV_RESULT, "min_length_mm", plan.ctx.min_dist);
    dm_provenance_num(prov, DM_PROV_RESULT, "max_length_mm", plan.ctx.max_dist);
    dm_provenance_num(prov, DM_PROV_RESULT, "calibration_directions", plan.ctx.ncalib);
    dm_provenance_num(prov, DM_PROV_RESULT, "calibration_ratio", plan.ctx.calib_ratio);
    dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)st.kept);
    dm_provenance_num(prov, DM_PROV_RESULT, "seeds", (double)st.next_id);
    dm_provenance_num(prov, DM_PROV_RESULT, "total_count", (double)st.total_count);
    dm_provenance_num(prov, DM_PROV_RESULT, "mean_length_mm",
                      st.kept ? st.length_sum / (double)st.kept : 0);
    dm_provenance_num(prov, DM_PROV_RESULT, "interrupted", interrupted);
    for (int v = 0; v < DM_FT_NVERDICT; v++) {
        char key[64];
        snprintf(key, sizeof key, "streamlines_%s", verdict_names[v]);
        dm_provenance_num(prov, DM_PROV_RESULT, key, (double)st.verdicts[v]);
    }
    for (int e = 1; e < DM_FT_NEND; e++) {
        char key[64];
        snprintf(key, sizeof key, "halves_ended_%s", end_names[e]);
        dm_provenance_num(prov, DM_PROV_RESULT, key, (double)st.ends[e]);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "proposals_above_envelope", (double)st.truncations);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_load", t_load);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_compile", t_compile);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_track", t_track);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_track_kernel", t_kernel);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write", now_seconds() - t_write);
    {
        char *path = dm_path_join(od.path, "provenance.json");
        int bad = !path || dm_provenance_write(prov, path) != 0;
        free(path);
        if (bad) goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    rc = interrupted ? dm_stop_error() : 0;
done:
    if (w) dm_tck_abort(w);
    if (bar) dm_progress_end(bar);
    if (rc != 0 && od.path) dm_outdir_abort(&od);
    if (gpu) dm_ft_gpu_close(gpu);
    dm_ft_batch_free(&batch);
    dm_ft_plan_free(&plan);
    free(header);
    free(tck_path);
    return rc;
}
