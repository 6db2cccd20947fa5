/* The commands of FOD tractography and of what follows it, over the engines of this folder
 * (fodtrack_files.h): their images and tractograms read into memory, their outputs written. */
#include "fodtrack/fodtrack_files.h"

#include "fodtrack/fodtrack_gpu.h"
#include "fodtrack/fodtrack_run.h"
#include "io/formats.h"
#include "io/volume.h"
#include "tractogram/tck.h"
#include "tractogram/tractogram.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"
#include "util/progress.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- dimoc track --fod: the images read ---- */

/* An image read, and its view. */
typedef struct {
    dm_volume v;
    dm_image_view view;
} read_image;

static int read_one(const char *path, read_image *im)
{
    if (dm_volume_read(path, &im->v) != 0) return -1;
    im->view = dm_view_of_volume(&im->v, path);
    return 0;
}

/* The FOD, seed, ACT and region images of o, read for dm_ft_run_open. */
typedef struct {
    read_image fod, seed, act;
    read_image *roi; /* the include, exclude and mask lists, in that order */
    dm_image_view *views;
    int nroi;
    char *lists[3]; /* the region lists split (the views' names point into them) */
    dm_ft_inputs in;
} track_files;

/* The paths of a comma-joined list (NULL: none) into roi from index *n; *copy keeps them. */
static int read_list(const char *list, track_files *f, int *n, char **copy_out)
{
    if (!list) return 0;
    char *copy = *copy_out = strdup(list), *save = NULL;
    int rc = copy ? 0 : dm_set_error("out of memory");
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && rc == 0;
         t = strtok_r(NULL, ",", &save)) {
        if (*n == DM_FT_MAX_ROI) {
            rc = dm_set_error("track: at most %d --include, --exclude and --mask images together",
                              DM_FT_MAX_ROI);
            break;
        }
        if ((rc = read_one(t, &f->roi[*n])) == 0) f->views[*n] = f->roi[*n].view, (*n)++;
    }
    return rc;
}

static void track_files_free(track_files *f)
{
    dm_volume_free(&f->fod.v);
    dm_volume_free(&f->seed.v);
    dm_volume_free(&f->act.v);
    for (int i = 0; i < f->nroi; i++) dm_volume_free(&f->roi[i].v);
    free(f->roi);
    free(f->views);
    for (int k = 0; k < 3; k++) free(f->lists[k]);
    memset(f, 0, sizeof *f);
}

static int track_files_read(const dm_fodtrack_options *o, track_files *f)
{
    memset(f, 0, sizeof *f);
    f->roi = calloc(DM_FT_MAX_ROI, sizeof *f->roi);
    f->views = calloc(DM_FT_MAX_ROI, sizeof *f->views);
    if (!f->roi || !f->views) return dm_set_error("out of memory");
    if (read_one(o->fod, &f->fod) != 0) return -1;
    if (o->act && read_one(o->act, &f->act) != 0) return -1;
    if (read_one(o->seed_gmwmi ? o->seed_gmwmi : o->seed, &f->seed) != 0) return -1;
    int n = 0, first[3];
    const char *lists[3] = {o->include, o->exclude, o->mask};
    for (int k = 0; k < 3; k++) {
        first[k] = n;
        if (read_list(lists[k], f, &n, &f->lists[k]) != 0) {
            f->nroi = n;
            return -1;
        }
    }
    f->nroi = n;
    dm_ft_inputs *in = &f->in;
    in->fod = f->fod.view;
    in->seed = f->seed.view;
    in->seed_gmwmi = o->seed_gmwmi != NULL;
    if (o->act) in->act = f->act.view;
    in->include = f->views + first[0];
    in->ninclude = first[1] - first[0];
    in->exclude = f->views + first[1];
    in->nexclude = first[2] - first[1];
    in->mask = f->views + first[2];
    in->nmask = n - first[2];
    return 0;
}

/* ---- dimoc track --fod: the outputs ---- */

/* Appends a batch's first `taken` streamlines to tracks.tck (.trx, .trk: --format) on a thread
 * of its own, so that the file is written while the next batch is traced (1M streamlines of
 * iFOD2 are 1.6 GB). */
typedef struct {
    pthread_t thread;
    int running;
    dm_tractogram_writer *w;
    const dm_ft_batch *b;
    long taken;
    int threads; /* the job's own: all the host's on the GPU, one beside CPU tracing */
    double seconds;
} tck_job;

static void *write_streamlines(void *arg)
{
    tck_job *j = arg;
    double t0 = dm_now_seconds();
    const dm_ft_batch *b = j->b;
    dm_tractogram_add_many(j->w, b->xyz, b->start, b->npts, j->taken, j->threads);
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
        const dm_ft_fod *f = &p->fod;
        const int n[3] = {f->nx, f->ny, f->nz};
        if (dm_tdi_init(&k->tdi, n, &f->v2w, f->voxel, o->fod, o->tdi_voxel > 0 ? vox : NULL) !=
            0)
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
                 : dm_tdi_add_tracks(&k->tdi, &view, threads, NULL);
    if (rc == 0 && k->conn_on) {
        dm_connectome part;
        rc = dm_connectome_build(&k->parc, &view, NULL, 4.0, threads, NULL, &part);
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

/* The engine's sink of the command: each batch to the tractogram file on a writer thread (one
 * writer at a time, in batch order), and to the maps. */
typedef struct {
    dm_ft_run *run;
    dm_tractogram_writer *w;
    tck_job jobs[2];
    sinks out;
    double write_seconds;
} file_sink;

static void file_sink_wait(void *user, int slot)
{
    file_sink *k = user;
    tck_job *j = &k->jobs[slot];
    if (j->running) pthread_join(j->thread, NULL);
    k->write_seconds += j->seconds;
    memset(j, 0, sizeof *j);
}

static int file_sink_add(void *user, int slot, const dm_ft_batch *b, long taken)
{
    file_sink *k = user;
    file_sink_wait(k, slot ^ 1); /* the batch before must be in the file first */
    dm_ft_gpu *gpu = k->run->gpu;
    tck_job_start(&k->jobs[slot], k->w, b, taken, gpu ? k->run->threads : 1);
    return sinks_add(&k->out, b, taken, gpu, k->run->threads);
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
    dm_ft_run run;
    memset(&run, 0, sizeof run);
    track_files files;
    dm_outdir od = {0};
    dm_progress *bar = NULL;
    char *header = NULL, *tck_path = NULL;
    file_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.run = &run;
    int opened = track_files_read(o, &files) == 0 && dm_ft_run_open(&run, o, &files.in) == 0;
    track_files_free(&files); /* the plan holds what it needs */
    if (!opened) goto done;
    const dm_ft_plan *plan = &run.plan;
    if (sinks_open(o, plan, run.gpu, &sink.out) != 0) goto done;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    /* tracks.tck, or .trx / .trk by --format, on the FOD image's grid */
    {
        char tracks[32];
        snprintf(tracks, sizeof tracks, "tracks%s",
                 dm_tracts_format_ext(dm_tracts_format_chosen()));
        tck_path = dm_path_join(od.path, tracks);
    }
    header = dm_ft_plan_header(plan, o);
    dm_tract_grid grid = {.valid = 1, .dims = {plan->fod.nx, plan->fod.ny, plan->fod.nz}};
    memcpy(grid.vox2ras, plan->fod.v2w.m, sizeof grid.vox2ras);
    sink.w = tck_path && header ? dm_tractogram_open(tck_path, header, &grid) : NULL;
    if (!sink.w) goto done;

    unsigned long long nseeds = plan->id_end - plan->id_first; /* this run's (--part: share) */
    bar = dm_progress_start("track", (long)(plan->select ? plan->select : nseeds),
                            plan->select ? "streamlines" : "seeds");
    dm_ft_sink to_files = {file_sink_add, file_sink_wait, &sink};
    if (dm_ft_run_track(&run, &to_files, bar, NULL) != 0) goto done;
    {
        char note[160];
        snprintf(note, sizeof note, "%llu streamlines from %llu seeds%s", run.kept,
                 run.next_id - plan->id_first, run.interrupted ? " (interrupted)" : "");
        dm_progress_finish(bar, note);
        bar = NULL;
    }
    double t_write = dm_now_seconds();
    long written = dm_tractogram_written(sink.w); /* the count tracks.tck's header gets */
    int closed = dm_tractogram_close(sink.w, run.total_count);
    sink.w = NULL;
    if (closed != 0) goto done;
    if (sinks_write(&sink.out, o, od.path, run.gpu, prov) != 0) goto done;
    if (weights) {
        char *path = dm_path_join(od.path, weights);
        int bad = !path || dm_tck_weights_write(path, NULL, written) != 0;
        free(path);
        if (bad) goto done;
    }
    dm_ft_run_provenance(&run, prov);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_maps", sink.out.seconds);
    dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write",
                      sink.write_seconds + dm_now_seconds() - t_write);
    {
        char *path = dm_path_join(od.path, "provenance.json");
        int bad = !path || dm_provenance_write(prov, path) != 0;
        free(path);
        if (bad) goto done;
    }
    /* a part's manifest last: an interrupted part (it kept what it tracked) has none, so that
     * `dimoc merge` refuses it */
    if (o->part.n > 0 && !run.interrupted && write_part(o, weights, od.path) != 0) goto done;
    if (dm_outdir_commit(&od) != 0) goto done;
    rc = run.interrupted ? dm_stop_error() : 0;
done:
    if (sink.w) dm_tractogram_abort(sink.w);
    if (bar) dm_progress_end(bar);
    if (rc != 0 && od.path) dm_outdir_abort(&od);
    sinks_free(&sink.out);
    dm_ft_run_close(&run);
    free(header);
    free(tck_path);
    return rc;
}

/* ---- dimoc tdi ---- */

int dm_tdi_write(const dm_tdi *m, const char *path)
{
    size_t n = (size_t)m->nx * m->ny * m->nz;
    double *values = malloc(n * sizeof *values);
    if (!values) return dm_set_error("%s: out of memory", path);
    for (size_t i = 0; i < n; i++) values[i] = m->weighted ? m->weighted[i] : m->count[i];
    int rc = dm_volume_write_affine(path, m->nx, m->ny, m->nz, m->vox2world.m, values,
                                    m->weighted ? DM_OUT_FLOAT32 : DM_OUT_UINT32);
    free(values);
    return rc;
}

/* The tracks and their weights (when asked) read. */
static int read_tracks(const char *path, const char *weights, int threads, dm_tck *t,
                       float **weight)
{
    *weight = NULL;
    if (dm_tractogram_read(path, t, threads) != 0) return -1;
    if (weights && dm_tractogram_weights(weights, t, path, weight) != 0) {
        dm_tck_free(t);
        return -1;
    }
    return 0;
}

int dm_tdi_command(const dm_tdi_options *o, dm_provenance *prov, dm_tdi_summary *s)
{
    memset(s, 0, sizeof *s);
    dm_tck tracks;
    dm_volume templ;
    dm_tdi map = {0};
    float *weight = NULL;
    if (read_tracks(o->tracks, o->weights, o->threads, &tracks, &weight) != 0) return -1;
    if (dm_volume_read_header(o->templ, &templ) != 0) {
        free(weight);
        dm_tck_free(&tracks);
        return -1;
    }
    int super = o->voxel_mm[0] > 0 || o->voxel_mm[1] > 0 || o->voxel_mm[2] > 0;
    char *step = o->exact ? NULL : dm_tck_property(&tracks, "step_size");
    dm_tdi_request rq = {.tracks = &tracks,
                         .weights = weight,
                         .n = {templ.nx, templ.ny, templ.nz},
                         .templ_name = o->templ,
                         .voxel_mm = super ? o->voxel_mm : NULL,
                         .exact = o->exact,
                         .step = step ? strtof(step, NULL) : NAN,
                         .threads = o->threads};
    free(step);
    dm_volume_vox2world(&templ, &rq.v2w);
    dm_volume_voxel_size(&templ, rq.pixdim);
    dm_volume_free(&templ);
    int rc = dm_tdi_make(&rq, &map, s);
    if (rc == 0) {
        dm_tdi_provenance(s, o->exact, prov);
        /* The map and its provenance beside it go in place together. */
        char *tmp[2] = {dm_volume_temp_name(o->out), NULL};
        char *final[2] = {(char *)o->out, dm_provenance_sidecar(o->out)};
        tmp[1] = final[1] ? dm_temp_sibling(final[1]) : NULL;
        if (!tmp[0])
            rc = -1;
        else if (!tmp[1])
            rc = dm_set_error("out of memory");
        else if ((rc = dm_tdi_write(&map, tmp[0])) == 0)
            rc = dm_provenance_write(prov, tmp[1]);
        if (rc == 0)
            rc = dm_commit_files(tmp, final, 2);
        else
            for (int i = 0; i < 2; i++)
                if (tmp[i]) unlink(tmp[i]);
        for (int i = 0; i < 2; i++) free(tmp[i]);
        free(final[1]);
    }
    dm_tdi_free(&map);
    dm_tck_free(&tracks);
    free(weight);
    return rc;
}

/* ---- dimoc connectome ---- */

int dm_parcellation_read(const char *path, dm_parcellation *p)
{
    memset(p, 0, sizeof *p);
    dm_volume v;
    if (dm_volume_read(path, &v) != 0) return -1;
    dm_image_view view = dm_view_of_volume(&v, path);
    int rc = dm_parcellation_from(&view, p);
    dm_volume_free(&v);
    return rc;
}

int dm_connectome_command(const dm_connectome_options *o, dm_provenance *prov,
                          dm_connectome *result)
{
    memset(result, 0, sizeof *result);
    /* Refuse an --out that cannot be replaced before the work. */
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    dm_tck tracks;
    dm_parcellation parc;
    float *weight = NULL;
    if (read_tracks(o->tracks, o->weights, o->threads, &tracks, &weight) != 0) return -1;
    if (dm_parcellation_read(o->parc, &parc) != 0) {
        free(weight);
        dm_tck_free(&tracks);
        return -1;
    }
    int rc = dm_connectome_make(&parc, o->parc, &tracks, weight, o->threads, NULL, result);
    dm_parcellation_free(&parc);
    dm_tck_free(&tracks);
    free(weight);
    if (rc != 0) return -1;

    dm_outdir od;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    static const char *const names[] = {"connectome.csv", "mean_length.csv", "provenance.json"};
    for (int k = 0; rc == 0 && k < 3; k++) {
        char *path = dm_path_join(od.path, names[k]);
        if (!path) {
            rc = dm_set_error("out of memory");
            break;
        }
        if (k == 0) rc = dm_connectome_write_csv(result, result->count, 0, path);
        if (k == 1) rc = dm_connectome_write_csv(result, result->length_sum, 1, path);
        if (k == 2) {
            dm_connectome_provenance(result, prov);
            rc = dm_provenance_write(prov, path);
        }
        free(path);
    }
    if (rc == 0) return dm_outdir_commit(&od);
    dm_outdir_abort(&od);
    return -1;
}
