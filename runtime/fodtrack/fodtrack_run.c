#include "fodtrack/fodtrack_run.h"

#include "fodtrack/connectome.h"
#include "fodtrack/fodtrack_batch.h"
#include "fodtrack/fodtrack_cpu.h"
#include "fodtrack/fodtrack_gpu.h"
#include "io/formats.h"
#include "tractogram/tck.h"
#include "tractogram/tractogram.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const end_names[DM_FT_NEND] = {
    "continue",       "exit_image",    "exit_mask",     "calibrator",           "model",
    "high_curvature", "length_exceed", "enter_exclude", "traverse_all_include", "enter_cgm",
    "enter_csf",      "exit_sgm",      "term_in_sgm"};
static const char *const verdict_names[DM_FT_NVERDICT] = {
    "accepted",      "seed_rejected",  "no_propagation",       "too_short",
    "enter_exclude", "missed_include", "act_poor_termination", "act_sgm_seed_never_in_wm",
    "too_long"};

/* Where the run stands. */
typedef struct {
    unsigned long long next_id;     /* ids [0, next_id) tracked */
    unsigned long long kept;        /* streamlines written */
    unsigned long long total_count; /* accepted + rejected streamlines (tckgen's total_count) */
    unsigned long long verdicts[DM_FT_NVERDICT];
    unsigned long long ends[DM_FT_NEND], truncations, evals, points;
    double length_sum;
    double write_seconds; /* appending to tracks.tck */
} progress_state;

/* The next batch, from id `from` (ids before it taken or under way, `ahead` of them under
 * way): enough ids to reach --select at the acceptance rate seen so far (with a margin), at
 * least `least`, at most `most` and the seeds left; 0 when the ids under way should suffice. */
static long next_batch(const dm_ft_plan *p, const progress_state *st, unsigned long long from,
                       long ahead, long least, long most)
{
    double want = (double)most;
    if (p->select) {
        unsigned long long done = st->next_id - p->id_first;
        double rate = done ? (double)st->kept / (double)done : 0;
        double left = (double)(p->select - st->kept);
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

/* Takes the batch's streamlines in id order until --select is reached (*taken of them; written
 * by a tck_job) and counts the ids up to the last one taken.  Returns 1 when the run is
 * complete. */
static int take_batch(const dm_ft_plan *p, const dm_ft_batch *b, progress_state *st, long *taken)
{
    long upto = b->n; /* ids of the batch that count */
    long i = 0;
    for (; i < b->count; i++) {
        if (p->select && st->kept == p->select) {
            upto = (long)(b->id[i] - b->first);
            break;
        }
        st->kept++;
    }
    if (p->select && st->kept == p->select && i == b->count && b->count > 0)
        upto = (long)(b->id[b->count - 1] - b->first) + 1;
    *taken = i;
    for (long k = 0; k < upto; k++) {
        st->verdicts[b->verdict[k]]++;
        if (b->verdict[k] != DM_FT_REJECT_SEED) st->total_count++;
        st->ends[b->ends[2 * k]]++;
        st->ends[b->ends[2 * k + 1]]++;
    }
    st->next_id = b->first + (unsigned long long)upto;
    st->truncations += b->truncations; /* of the whole batch: statistics only */
    st->evals += b->evals;
    return (p->select && st->kept == p->select) || st->next_id >= p->id_end;
}

/* Appends a batch's first `taken` streamlines to tracks.tck (.trx, .trk: --format) on a thread
 * of its own, so that the
 * file is written while the next batch is traced (1M streamlines of iFOD2 are 1.6 GB). */
typedef struct {
    pthread_t thread;
    int running;
    dm_tractogram_writer *w;
    const dm_ft_batch *b;
    long taken;
    int threads; /* the job's own: all the host's on the GPU, one beside CPU tracing */
    double length_sum, seconds;
    unsigned long long points;
} tck_job;

static void *write_streamlines(void *arg)
{
    tck_job *j = arg;
    double t0 = dm_now_seconds();
    const dm_ft_batch *b = j->b;
    dm_tractogram_add_many(j->w, b->xyz, b->start, b->npts, j->taken, j->threads);
    /* lengths in parallel, summed in order: the same sum whatever the threads */
    double *len = malloc((size_t)(j->taken ? j->taken : 1) * sizeof *len);
#pragma omp parallel for schedule(static) num_threads(j->threads)
    for (long i = 0; i < j->taken; i++)
        len[i] = polyline_length(b->xyz + 3 * b->start[i], b->npts[i]);
    for (long i = 0; i < j->taken; i++) {
        j->points += (unsigned long long)b->npts[i];
        j->length_sum += len[i];
    }
    free(len);
    j->seconds = dm_now_seconds() - t0;
    return NULL;
}

static void tck_job_start(tck_job *j, dm_tractogram_writer *w, const dm_ft_batch *b, long taken,
                          int threads)
{
    memset(j, 0, sizeof *j);
    j->w = w;
    j->b = b;
    j->taken = taken;
    j->threads = threads;
    j->running = pthread_create(&j->thread, NULL, write_streamlines, j) == 0;
    if (!j->running) write_streamlines(j); /* no thread: here and now */
}

/* Waits for the job (nothing when none) and adds what it wrote to the run's counts. */
static void tck_job_join(tck_job *j, progress_state *st)
{
    if (j->running) pthread_join(j->thread, NULL);
    j->running = 0;
    st->points += j->points;
    st->length_sum += j->length_sum;
    st->write_seconds += j->seconds;
    memset(j, 0, sizeof *j);
}

/* The optional outputs built from the streamlines kept: the track-density image (on the GPU
 * when tracking is there) and the connectome. */
typedef struct {
    int tdi_on, conn_on;
    dm_tdi tdi;
    dm_parcellation parc;
    dm_connectome conn;
    double seconds;
} sinks;

static int sinks_open(const dm_fodtrack_options *o, const dm_ft_plan *p, dm_ft_gpu *gpu, sinks *k)
{
    memset(k, 0, sizeof *k);
    if (o->tdi) {
        double vox[3] = {o->tdi_voxel, o->tdi_voxel, o->tdi_voxel};
        if (dm_tdi_init(&k->tdi, &p->fod.header, o->fod, o->tdi_voxel > 0 ? vox : NULL) != 0)
            return -1;
        if (!o->tdi_exact) {
            /* tckmap's ratio from the step_size the .tck header carries: the plan's step as
             * dm_ft_plan_header prints it, read back as tckmap reads it */
            char text[64];
            snprintf(text, sizeof text, "%g", (double)p->ctx.step);
            k->tdi.ratio = dm_tdi_upsample_ratio(&k->tdi, strtof(text, NULL));
        }
        k->tdi_on = 1;
        if (gpu && dm_ft_gpu_tdi_start(gpu, &k->tdi) != 0) return -1;
    }
    if (o->connectome) {
        if (dm_parcellation_read(o->connectome, &k->parc) != 0) return -1;
        k->conn_on = 1;
        size_t n = (size_t)k->parc.max_label;
        k->conn.nodes = (int)n;
        k->conn.count = calloc(n * n + 1, sizeof *k->conn.count);
        k->conn.length_sum = calloc(n * n + 1, sizeof *k->conn.length_sum);
        k->conn.length_fixed = calloc(n * n + 1, sizeof *k->conn.length_fixed);
    }
    return 0;
}

/* Adds the first `taken` streamlines of b. */
static int sinks_add(sinks *k, const dm_ft_batch *b, long taken, dm_ft_gpu *gpu, int threads)
{
    if (taken <= 0 || (!k->tdi_on && !k->conn_on)) return 0;
    double t0 = dm_now_seconds();
    long *start = malloc((taken + 1) * sizeof *start), *npts = malloc(taken * sizeof *npts);
    for (long i = 0; i < taken; i++) {
        start[i] = (long)b->start[i];
        npts[i] = b->npts[i];
    }
    start[taken] = 0;
    dm_tck view = {.xyz = b->xyz, .npoints = npts, .start = start, .count = taken};
    int rc = 0;
    if (k->tdi_on)
        rc = gpu ? dm_ft_gpu_tdi_add(gpu, b, taken, &k->tdi, threads)
                 : dm_tdi_add_tracks(&k->tdi, &view, threads);
    if (rc == 0 && k->conn_on) {
        dm_connectome part;
        rc = dm_connectome_build(&k->parc, &view, NULL, 4.0, threads, &part);
        if (rc == 0) {
            size_t n = (size_t)k->conn.nodes * k->conn.nodes + 1;
            for (size_t e = 0; e < n; e++) {
                k->conn.count[e] += part.count[e];
                k->conn.length_fixed[e] += part.length_fixed[e]; /* exact: any grouping */
            }
            k->conn.assigned += part.assigned;
            k->conn.unassigned += part.unassigned;
            dm_connectome_free(&part);
        }
    }
    free(start);
    free(npts);
    k->seconds += dm_now_seconds() - t0;
    return rc;
}

static int sinks_write(sinks *k, const dm_fodtrack_options *o, const char *dir, dm_ft_gpu *gpu,
                       dm_provenance *prov)
{
    if (k->conn_on) dm_connectome_finish(&k->conn);
    int rc = 0;
    if (k->tdi_on) {
        if (gpu) rc = dm_ft_gpu_tdi_finish(gpu, &k->tdi);
        char *path = dm_path_join(dir, o->tdi);
        if (rc == 0) rc = dm_tdi_write(&k->tdi, path);
        free(path);
        dm_provenance_num(prov, DM_PROV_RESULT, "tdi_voxel_mm", o->tdi_voxel);
        dm_provenance_str(prov, DM_PROV_RESULT, "tdi_mapping", o->tdi_exact ? "exact" : "tckmap");
        dm_provenance_num(prov, DM_PROV_RESULT, "tdi_upsample_ratio", k->tdi.ratio);
    }
    if (rc == 0 && k->conn_on) {
        char *path = dm_path_join(dir, "connectome.csv");
        rc = dm_connectome_write_csv(&k->conn, k->conn.count, 0, path);
        free(path);
        path = dm_path_join(dir, "mean_length.csv");
        if (rc == 0) rc = dm_connectome_write_csv(&k->conn, k->conn.length_sum, 1, path);
        free(path);
        /* a part: the counts and exact sums that `dimoc merge` makes mean_length.csv from */
        path = dm_path_join(dir, ".mean_length.csv.sums");
        if (rc == 0 && o->part.n > 0) rc = dm_connectome_write_sums(&k->conn, path);
        free(path);
        dm_provenance_num(prov, DM_PROV_RESULT, "connectome_nodes", k->conn.nodes);
        dm_provenance_num(prov, DM_PROV_RESULT, "connectome_assigned", (double)k->conn.assigned);
        dm_provenance_num(prov, DM_PROV_RESULT, "connectome_unassigned",
                          (double)k->conn.unassigned);
    }
    return rc;
}

static void sinks_free(sinks *k)
{
    if (k->tdi_on) dm_tdi_free(&k->tdi);
    if (k->conn_on) {
        dm_parcellation_free(&k->parc);
        dm_connectome_free(&k->conn);
    }
    memset(k, 0, sizeof *k);
}

/* --part: part.json, how `dimoc merge` joins each output with the other parts'. */
static int write_part(const dm_fodtrack_options *o, const char *weights, const char *dir)
{
    dm_part_rule rules[8];
    int n = 0;
    char tracks[32];
    snprintf(tracks, sizeof tracks, "tracks%s", dm_tracts_format_ext(dm_tracts_format_chosen()));
    rules[n++] = (dm_part_rule){tracks, DM_MERGE_TCK};
    if (o->tdi) rules[n++] = (dm_part_rule){o->tdi, DM_MERGE_SUM};
    if (o->connectome) {
        rules[n++] = (dm_part_rule){"connectome.csv", DM_MERGE_COUNTS};
        rules[n++] = (dm_part_rule){"mean_length.csv", DM_MERGE_MEAN};
        rules[n++] = (dm_part_rule){".mean_length.csv.sums", DM_MERGE_PART};
    }
    if (weights) rules[n++] = (dm_part_rule){weights, DM_MERGE_LINES};
    char *command = dm_part_command();
    dm_part_info info = {.command = command};
    int rc = dm_part_write(dir, &o->part, &info, rules, n);
    free(command);
    return rc;
}

int dm_fodtrack_command(const dm_fodtrack_options *o, const char *weights, dm_provenance *prov)
{
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    int rc = -1;
    double t0 = dm_now_seconds();
    dm_ft_plan plan;
    dm_ft_gpu *gpu = NULL;
    dm_outdir od = {0};
    dm_tractogram_writer *w = NULL;
    dm_ft_batch batches[2] = {{0}, {0}}; /* one traced while the other is written */
    tck_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    int cur = 0;
    dm_progress *bar = NULL;
    char *header = NULL, *tck_path = NULL;
    progress_state st;
    memset(&st, 0, sizeof st);
    sinks out;
    memset(&out, 0, sizeof out);
    if (dm_ft_plan_build(o, &plan) != 0) goto done;
    double t_load = dm_now_seconds() - t0, t_compile = 0;
    int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    if (o->use_gpu) {
        double tc = dm_now_seconds();
        gpu = dm_ft_gpu_open(&plan, o->use_double, o->gpus, o->gpu_memory_mb);
        if (!gpu) goto done;
        t_compile = dm_now_seconds() - tc;
    }
    if (sinks_open(o, &plan, gpu, &out) != 0) goto done;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    /* tracks.tck, or .trx / .trk by --format, on the FOD image's grid */
    {
        char tracks[32];
        snprintf(tracks, sizeof tracks, "tracks%s",
                 dm_tracts_format_ext(dm_tracts_format_chosen()));
        tck_path = dm_path_join(od.path, tracks);
    }
    header = dm_ft_plan_header(&plan, o);
    dm_tract_grid grid;
    dm_tract_grid_of(&plan.fod.header, &grid);
    w = tck_path ? dm_tractogram_open(tck_path, header, &grid) : NULL;
    if (!w) goto done;

    st.next_id = plan.id_first;
    unsigned long long nseeds = plan.id_end - plan.id_first; /* this run's (--part: share) */
    bar = dm_progress_start("track", (long)(plan.select ? plan.select : nseeds),
                            plan.select ? "streamlines" : "seeds");
    double t_track = dm_now_seconds(), t_kernel = 0;
    /* GPU batches of 2-4 streamlines per resident thread: small enough that the last batch's
     * write (what the tracing cannot hide) stays short, and two in flight hide each kernel's
     * tail, when its last long streamlines leave most lanes idle */
    long least = gpu ? 2 * dm_ft_gpu_threads(gpu) : 256L * threads;
    long most = gpu ? 4 * dm_ft_gpu_threads(gpu) : 4096L * threads;
    if (gpu && most > dm_ft_gpu_max_batch(gpu)) most = dm_ft_gpu_max_batch(gpu);
    if (least > most) least = most;
    int interrupted = 0;
    unsigned long long planned = plan.id_first; /* ids handed to the GPU */
    for (int complete = 0; !complete; cur ^= 1) {
        dm_ft_batch *batch = &batches[cur];
        tck_job_join(&jobs[cur], &st); /* its batch's points are about to be replaced */
        double tk = dm_now_seconds();
        if (gpu) {
            /* keep two batches under way while more may be needed */
            while (dm_ft_gpu_pending(gpu) < 2) {
                long ahead = (long)(planned - st.next_id);
                long n = next_batch(&plan, &st, planned, ahead, least, most);
                if (n <= 0) break;
                if (dm_ft_gpu_submit(gpu, planned, n) != 0) goto done;
                planned += (unsigned long long)n;
            }
            if (!dm_ft_gpu_pending(gpu)) break;
            if (dm_ft_gpu_collect(gpu, batch, threads) != 0) goto done;
        } else {
            long n = next_batch(&plan, &st, st.next_id, 0, least, most);
            if (n <= 0) break;
            int traced = dm_ft_cpu_batch(&plan.ctx, o->use_double, plan.buf_points, st.next_id, n,
                                         threads, batch);
            if (traced == -2) goto done;
            if (traced != 0) { /* stopped midway: not taken */
                dm_stop_take();
                interrupted = 1;
                break;
            }
        }
        t_kernel += dm_now_seconds() - tk;
        unsigned long long before = plan.select ? st.kept : st.next_id;
        long taken = 0;
        complete = take_batch(&plan, batch, &st, &taken);
        /* the batch before must be in the file first: one writer at a time, in batch order */
        tck_job_join(&jobs[cur ^ 1], &st);
        tck_job_start(&jobs[cur], w, batch, taken, gpu ? threads : 1);
        if (sinks_add(&out, batch, taken, gpu, threads) != 0) goto done;
        dm_progress_add(bar, (long)((plan.select ? st.kept : st.next_id) - before));
        if (dm_stop_take()) {
            interrupted = 1;
            break;
        }
    }
    t_track = dm_now_seconds() - t_track;
    if (bar) {
        char note[160];
        snprintf(note, sizeof note, "%llu streamlines from %llu seeds%s", st.kept,
                 st.next_id - plan.id_first, interrupted ? " (interrupted)" : "");
        dm_progress_finish(bar, note);
        bar = NULL;
    }
    tck_job_join(&jobs[0], &st);
    tck_job_join(&jobs[1], &st);
    double t_write = dm_now_seconds();
    long written = dm_tractogram_written(w); /* the count tracks.tck's header gets */
    int closed = dm_tractogram_close(w, st.total_count);
    w = NULL;
    if (closed != 0) goto done;
    if (sinks_write(&out, o, od.path, gpu, prov) != 0) goto done;
    if (weights) {
        char *path = dm_path_join(od.path, weights);
        int bad = !path || dm_tck_weights_write(path, NULL, written) != 0;
        free(path);
        if (bad) goto done;
    }

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
    dm_provenance_num(prov, DM_PROV_RESULT, "seeds", (double)(st.next_id - plan.id_first));
    if (o->part.n > 0) {
        dm_provenance_num(prov, DM_PROV_RESULT, "part", o->part.k);
        dm_provenance_num(prov, DM_PROV_RESULT, "parts", o->part.n);
        dm_provenance_num(prov, DM_PROV_RESULT, "seed_id_first", (double)plan.id_first);
        dm_provenance_num(prov, DM_PROV_RESULT, "seed_id_end", (double)plan.id_end);
    }
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
    dm_provenance_num(prov, DM_PROV_RESULT, "fod_amplitudes_evaluated", (double)st.evals);
    dm_provenance_num(prov, DM_PROV_RESULT, "points", (double)st.points);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_load", t_load);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_compile", t_compile);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_track", t_track);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_tracing", t_kernel);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_maps", out.seconds);
    if (gpu) {
        const dm_ft_gpu_times *gt = dm_ft_gpu_timing(gpu);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_upload", gt->upload);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_wait", gt->wait);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_gpu_download", gt->download);
    }
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write",
                      st.write_seconds + dm_now_seconds() - t_write);
    {
        char *path = dm_path_join(od.path, "provenance.json");
        int bad = !path || dm_provenance_write(prov, path) != 0;
        free(path);
        if (bad) goto done;
    }
    /* a part's manifest last: an interrupted part (it kept what it tracked) has none, so that
     * `dimoc merge` refuses it */
    if (o->part.n > 0 && !interrupted && write_part(o, weights, od.path) != 0) goto done;
    if (dm_outdir_commit(&od) != 0) goto done;
    rc = interrupted ? dm_stop_error() : 0;
done:
    tck_job_join(&jobs[0], &st);
    tck_job_join(&jobs[1], &st);
    if (w) dm_tractogram_abort(w);
    if (bar) dm_progress_end(bar);
    if (rc != 0 && od.path) dm_outdir_abort(&od);
    if (gpu) dm_ft_gpu_close(gpu);
    sinks_free(&out);
    dm_ft_batch_free(&batches[0]);
    dm_ft_batch_free(&batches[1]);
    dm_ft_plan_free(&plan);
    free(header);
    free(tck_path);
    return rc;
}
