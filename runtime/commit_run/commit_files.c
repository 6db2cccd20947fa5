/* `dimoc commit` (commit_files.h): its files read for the run (commit_run.c), COMMIT's outputs
 * written, the dictionary stage. */
#include "commit_run/commit_files.h"
#include "commit_run/commit_run.h"
#include "commit_run/side_job.h"
#include "commit/commit_dictfile.h"
#include "gpu/gpu_device.h"
#include "io/formats.h"
#include "io/space.h"
#include "io/volume.h"
#include "tractogram/tractogram.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"
#include "util/progress.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the inputs ---- */

/* The images read for the run, held until it ends. */
enum { IMG_PEAKS, IMG_ISO_MASK, IMG_LAMBDA_ISO, IMG_CONFIDENCE, NIMAGES };

typedef struct {
    dm_volume image[NIMAGES];
} file_source;

/* volume-fractions: a 3D map and the mask, as a one-sample "DWI" (commit_inputs.h). */
static int scalar_map_read(const dm_commit_options *o, dm_dwi *w)
{
    memset(w, 0, sizeof *w);
    w->data_path = o->data;
    w->mask_path = o->mask;
    if (dm_volume_read(o->data, &w->data) != 0) return -1;
    if (w->data.nt != 1)
        return dm_set_error("%s: %d volumes; --model volume-fractions takes a 3D map", o->data,
                            w->data.nt);
    if (o->mask) {
        if (dm_volume_read(o->mask, &w->mask) != 0) return -1;
        if (w->mask.nt > 1) return dm_set_error("%s: a 4D image; a mask is 3D", o->mask);
        if (dm_volume_check_same_grid(&w->mask, o->mask, &w->data, o->data) != 0) return -1;
    }
    return dm_commit_scalar_table(w);
}

static int src_data(void *user, const dm_commit_options *o, dm_dwi *w, dm_affine *v2w)
{
    (void)user;
    int rc = o->model.scalar ? scalar_map_read(o, w)
                             : dm_dwi_read(w, o->data, o->bvals, o->bvecs, o->mask);
    dm_volume_vox2world(&w->data, v2w);
    return rc;
}

static void src_free_data(void *user, dm_dwi *w)
{
    (void)user;
    dm_dwi_free(w);
}

static int src_tracks(void *user, const dm_commit_options *o, int threads, dm_tck *t)
{
    (void)user;
    return dm_tractogram_read(o->tractogram, t, threads);
}

static int src_pulses(void *user, const dm_commit_options *o, int nvol, const double *bval,
                      dm_commit_pulse_table *p)
{
    (void)user;
    return dm_commit_pulses_read(o->scheme, nvol, bval, p);
}

/* An image of the data's grid read into slot k: 3D (unless any_nt), the same grid. */
static int read_image(file_source *f, int k, const char *path, const char *option, int any_nt,
                      const dm_dwi *w, const char *data_path, dm_image_view *v)
{
    dm_volume *m = &f->image[k];
    if (dm_volume_read(path, m) != 0) return -1;
    int rc = !any_nt && m->nt > 1 ? dm_set_error("%s: a 4D image; %s is 3D", path, option)
                                  : dm_volume_check_same_grid(m, path, &w->data, data_path);
    *v = dm_view_of_volume(m, path);
    return rc;
}

static int src_peaks(void *user, const dm_commit_options *o, const dm_dwi *w, dm_image_view *v)
{
    return read_image(user, IMG_PEAKS, o->peaks, "--peaks", 1, w, o->data, v);
}

static int src_image(void *user, const dm_commit_options *o, int which, const dm_dwi *w,
                     dm_image_view *v)
{
    if (which == DM_COMMIT_ISO_MASK)
        return read_image(user, IMG_ISO_MASK, o->iso_mask, "--iso-mask", 0, w, o->data, v);
    if (which == DM_COMMIT_LAMBDA_ISO_WEIGHTS)
        return read_image(user, IMG_LAMBDA_ISO, o->lambda_iso_weights, "--lambda-iso-weights", 0,
                          w, o->data, v);
    return read_image(user, IMG_CONFIDENCE, o->confidence_map, "--confidence-map", 1, w, o->data,
                      v);
}

/* A per-streamline file or dps:NAME (any count: the run checks it against the streamlines). */
static int src_values(void *user, const dm_commit_options *o, int which, const dm_tck *t,
                      dm_commit_values *v)
{
    (void)user;
    v->name = which == DM_COMMIT_GROUPS         ? o->groups
              : which == DM_COMMIT_BLUR_APPLY   ? o->blur_apply_to
                                                : o->lambda_weights;
    return dm_tractogram_values(v->name, t, o->tractogram, &v->v, &v->n);
}

static int src_dictionary(void *user, const dm_commit_options *o, const dm_tck *t,
                          const dm_commit_grid *g, const dm_commit_dirs *dirs,
                          const dm_commit_dict_options *dopt, size_t nvox, dm_commit_dict *d)
{
    (void)user;
    dm_commit_dict_facts facts;
    dm_commit_dict_facts_make(t, g, (unsigned)dirs->n, dopt, dopt->threads, &facts);
    if (dm_commit_dict_load(o->dictionary, &facts, g, d) != 0) return -1;
    return dm_commit_dict_index(d, nvox, dopt->threads);
}

static void src_release(void *user)
{
    file_source *f = user;
    for (int k = 0; k < NIMAGES; k++) dm_volume_free(&f->image[k]);
}

/* ---- the outputs ---- */

/* Writes one map of the voxels of the fit (value per voxel; NULL: all 0) on the data's grid. */
static int write_map(const char *dir, const char *name, const dm_dwi *w, const dm_commit_dict *d,
                     const double *value)
{
    const size_t nvox = DM_NVOX(&w->data);
    double *img = calloc(nvox, sizeof *img);
    if (!img) return dm_set_error("commit: out of memory for the maps");
    for (long v = 0; value && v < d->nvox; v++) img[d->vox[v]] = value[v];
    char *path = dm_volume_output_path(dir, name);
    int rc = path ? dm_volume_write(path, &w->data, 1, img, DM_OUT_FLOAT32) : -1;
    free(path);
    free(img);
    return rc;
}

/* streamline_weights.txt: the weights "%.5e" a line, formatted by all threads, a block of
 * streamlines each, and written in order. */
static int write_weights(const char *dir, const double *weight, long nlines, int threads)
{
    enum { LINES = 1 << 14, LINE_BYTES = 32 }; /* "%.5e\n" of a double: at most 14 bytes */
    char *path = dm_path_join(dir, "streamline_weights.txt");
    FILE *f = path ? fopen(path, "w") : NULL;
    const long nblocks = (nlines + LINES - 1) / LINES;
    char *text = malloc((size_t)(nblocks ? nblocks : 1) * LINES * LINE_BYTES);
    size_t *len = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *len);
    int rc = 0;
    if (!f) {
        rc = dm_set_error("cannot write %s", path ? path : "streamline_weights.txt");
    } else if (!text || !len) {
        fclose(f);
        rc = dm_set_error("commit: out of memory for %s", path);
    } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long b = 0; b < nblocks; b++) {
            char *out = text + (size_t)b * LINES * LINE_BYTES;
            size_t n = 0;
            for (long i = b * LINES; i < nlines && i < (b + 1) * LINES; i++)
                n += (size_t)snprintf(out + n, LINE_BYTES, "%.5e\n", weight[i]);
            len[b] = n;
        }
        for (long b = 0; b < nblocks; b++)
            fwrite(text + (size_t)b * LINES * LINE_BYTES, 1, len[b], f);
        if (ferror(f) | (fclose(f) != 0)) rc = dm_set_error("cannot write %s", path);
    }
    free(text);
    free(len);
    free(path);
    return rc;
}

/* --blur-clust-thr: streamline_clusters.txt, per input streamline its cluster (numbered as
 * dicelib's, in the order they were founded; -1: an empty streamline) and 1 when it is its
 * cluster's representative (the streamline fitted), else 0. */
static int write_clusters(const char *dir, const long *cluster_of, const long *input_of, long nfit,
                          long ninput)
{
    char *path = dm_path_join(dir, "streamline_clusters.txt");
    FILE *f = path ? fopen(path, "w") : NULL;
    unsigned char *rep = calloc((size_t)(ninput ? ninput : 1), 1);
    int rc = 0;
    if (!f || !rep) {
        rc = dm_set_error("cannot write %s", path ? path : "streamline_clusters.txt");
    } else {
        for (long m = 0; m < nfit; m++) rep[input_of[m]] = 1;
        for (long i = 0; i < ninput; i++) fprintf(f, "%ld %d\n", cluster_of[i], rep[i]);
    }
    if (f && (ferror(f) | (fclose(f) != 0)) && rc == 0) rc = dm_set_error("cannot write %s", path);
    free(rep);
    free(path);
    return rc;
}


/* filtered.tck (.trx, .trk: --format): the streamlines of weight > 0, in their order (written
 * by all threads); a TRX or .trk on the data's grid, with their weights (as
 * streamline_weights.txt has them) as dps "commit_weights". */
static int write_filtered(const char *dir, const dm_tck *t, const dm_commit_dict *d,
                          const dm_dwi *dwi, const double *xo, int blur, int threads, long *nonzero)
{
    char name[32];
    snprintf(name, sizeof name, "filtered%s", dm_tracts_format_ext(dm_tracts_format_chosen()));
    char *path = dm_path_join(dir, name);
    dm_tract_grid grid;
    dm_tract_grid_of(&dwi->data, &grid);
    dm_tractogram_writer *w =
        path ? dm_tractogram_open(path, "source: dimoc commit\n", &grid) : NULL;
    free(path);
    if (!w) return -1;
    size_t *start = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *start);
    int *npts = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *npts);
    float *weight = malloc((size_t)(d->nstr ? d->nstr : 1) * sizeof *weight);
    if (!start || !npts || !weight) {
        free(start);
        free(npts);
        free(weight);
        dm_tractogram_abort(w);
        return dm_set_error("commit: out of memory for %s", name);
    }
    long n = 0;
    for (long s = 0; s < d->nstr; s++)
        if (d->column[s] >= 0 && xo[d->column[s]] > 0) {
            start[n] = (size_t)t->start[s];
            weight[n] = (float)dm_commit_streamline_weight(d, xo, blur, s);
            npts[n++] = (int)t->npoints[s];
        }
    int rc = dm_tractogram_set_dps(w, "commit_weights", weight, n);
    if (rc == 0) rc = dm_tractogram_add_many(w, t->xyz, start, npts, n, threads > 0 ? threads : 1);
    free(start);
    free(npts);
    free(weight);
    *nonzero = n;
    if (rc != 0) {
        dm_tractogram_abort(w);
        return -1;
    }
    return dm_tractogram_close(w, (unsigned long long)n);
}

/* The outputs written on threads of their own (dm_side_job) while the run computes the error
 * maps: filtered.tck as soon as the weights are known, the weights' file, the clusters and
 * the compartment maps.  On the CPU the one A x product of the error maps is most of the
 * stage; on the GPU filtered.tck (about 0.9 GB for a million streamlines) is. */
typedef struct {
    const char *dir;
    const dm_commit_fitted *f;
    const dm_commit_made *m;
    long nonzero;
} output_job;

static int filtered_work(void *arg)
{
    output_job *j = arg;
    const dm_commit_fitted *f = j->f;
    return write_filtered(j->dir, f->t, f->d, f->w, j->m->xo, dm_commit_blur_on(f->dopt),
                          f->threads, &j->nonzero);
}

static int compartments_work(void *arg)
{
    output_job *j = arg;
    const dm_commit_fitted *f = j->f;
    const dm_commit_made *m = j->m;
    int rc = write_weights(j->dir, m->weights, m->nweights, f->threads);
    if (rc == 0 && f->cluster_of)
        rc = write_clusters(j->dir, f->cluster_of, f->input_of, f->d->nstr, f->ninput);
    for (int k = 0; rc == 0 && k < m->ncompartments; k++)
        rc = write_map(j->dir, m->name[k], f->w, f->d, m->value[k]);
    return rc;
}

/* The sink of the command: --out's temporary folder, the writers beside the run. */
typedef struct {
    const dm_commit_options *o;
    dm_outdir od;
    int begun;
    dm_side_job fj, cj;
    output_job fjob, cjob;
} file_sink;

static int sink_compartments(void *user, const dm_commit_fitted *f, const dm_commit_made *m)
{
    file_sink *k = user;
    if (dm_outdir_begin(&k->od, k->o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    k->begun = 1;
    k->fjob = (output_job){k->od.path, f, m, 0};
    k->cjob = (output_job){k->od.path, f, m, 0};
    dm_side_start(&k->fj, filtered_work, &k->fjob);
    dm_side_start(&k->cj, compartments_work, &k->cjob);
    return 0;
}

static int sink_errors(void *user, const dm_commit_fitted *f, const dm_commit_made *m)
{
    file_sink *k = user;
    int wr = 0;
    for (int i = m->ncompartments; wr == 0 && i < m->nmaps; i++)
        wr = write_map(k->od.path, m->name[i], f->w, f->d, m->value[i]);
    /* the first error in the order the files were once written in, one after another: the
     * weights and the compartment maps, the error maps, filtered.tck */
    if (dm_side_end(&k->cj, 1) != 0) wr = -1;
    if (dm_side_end(&k->fj, wr == 0) != 0) wr = -1;
    return wr;
}

/* The writers waited for after a failure (the run's error stands), the folder removed. */
static void sink_abort(file_sink *k)
{
    if (k->cj.running) dm_side_end(&k->cj, 0);
    if (k->fj.running) dm_side_end(&k->fj, 0);
    if (k->begun) dm_outdir_abort(&k->od);
    k->begun = 0;
}

/* ---- the dictionary stage ---- */

/* The tractogram (often a gigabyte) read on a thread of its own while the data are. */
typedef struct {
    const char *path;
    dm_tck *t;
    int threads;
} tck_read;

static int read_tck(void *arg)
{
    tck_read *r = arg;
    return dm_tractogram_read(r->path, r->t, r->threads);
}

/* Waits for the reader; other_rc is the result of what ran meanwhile (its error stands). */
static int tck_read_end(dm_side_job *j, const tck_read *r, int other_rc)
{
    if (dm_side_end(j, other_rc == 0) != 0 || other_rc != 0) return -1;
    if (r->t->count == 0) return dm_set_error("%s: no streamlines", r->path);
    return 0;
}

/* --stage dictionary [--part K/N]: the tractogram, the header of --data and --mask read; the
 * dictionary of the share cut and saved into --out (with part.json for a part). */
static int dictionary_stage(const dm_commit_options *o, int threads, dm_provenance *prov,
                            dm_commit_summary *sum)
{
    double t0 = dm_now_seconds();
    dm_tck t;
    memset(&t, 0, sizeof t);
    dm_volume data = {0}, maskvol = {0};
    unsigned char *mask = NULL, *blur_apply = NULL;
    long *input_of = NULL, ninput = 0, *cluster_of = NULL;
    dm_commit_dirs dirs = {0};
    dm_commit_dict d = {0};
    int rc = -1, use_gpu = 0;
    dm_commit_gpu *gpu = NULL;
    dm_gpu_probe probe; /* the driver starts while the inputs load */
    if (dm_gpu_probe_begin(&probe, o->device, "commit") != 0) return -1;
    dm_side_job tj;
    tck_read tr = {o->tractogram, &t, threads};
    dm_side_start(&tj, read_tck, &tr);
    /* the mask as dm_dwi_read (or the scalar map's reader) checks it */
    int vrc = dm_volume_read_header(o->data, &data);
    if (vrc == 0 && o->mask) vrc = dm_volume_read(o->mask, &maskvol);
    if (vrc == 0 && o->mask && maskvol.nt > 1)
        vrc = dm_set_error("%s: a 4D image; a mask is 3D", o->mask);
    if (vrc == 0 && o->mask)
        vrc = o->model.scalar ? dm_volume_check_same_grid(&maskvol, o->mask, &data, o->data)
                              : dm_volume_check_same_space(&maskvol, o->mask, &data, o->data);
    if (tck_read_end(&tj, &tr, vrc) != 0) goto done;
    double t_clust = dm_now_seconds();
    if (dm_commit_cluster_tractogram(o, &t, threads, &input_of, &ninput, &cluster_of) != 0)
        goto done;
    t_clust = dm_now_seconds() - t_clust;
    if (o->blur_apply_to) {
        const dm_tck input = {.count = ninput, .ndps = t.ndps, .dps = t.dps};
        dm_commit_values v = {0};
        int read = src_values(NULL, o, DM_COMMIT_BLUR_APPLY, &input, &v);
        blur_apply = read == 0 ? dm_commit_read_blur_apply(o, &v, &t, input_of, ninput) : NULL;
        free(v.v);
        if (!blur_apply) goto done;
    }
    const double t_load = dm_now_seconds() - t0 - t_clust; /* the clustering timed apart */
    double t1 = dm_now_seconds();
    dm_commit_grid g;
    dm_affine v2w;
    dm_volume_vox2world(&data, &v2w);
    if (dm_commit_make_grid(data.nx, data.ny, data.nz, &v2w, o->data, maskvol.data, &g, &mask) !=
        0)
        goto done;
    if (dm_commit_dirs_make(o->ndirs, &dirs) != 0) goto done;
    size_t first, end;
    dm_part_range(&o->part, (size_t)t.count, &first, &end);
    dm_commit_dict_options dopt = dm_commit_dict_options_of(o, threads);
    dopt.blur_apply = blur_apply;
    /* on the GPU when there is one, as in a whole run (the blur's copies on the host) */
    if (dm_gpu_probe_end(&probe, &use_gpu) != 0) goto done;
    use_gpu = use_gpu && !dm_commit_blur_on(&dopt);
    if (use_gpu && !(gpu = dm_commit_gpu_prepare(data.nt > 0 ? data.nt : 1, o->gpus, threads)))
        goto done;
    if (use_gpu ? dm_commit_dict_cut_gpu(gpu, &t, (long)first, (long)end, &g, &dirs, &dopt, &d)
                : dm_commit_dict_cut(&t, (long)first, (long)end, &g, &dirs, &dopt, &d))
        goto done;
    if (d.nkept == 0 && o->part.n == 0) { /* a part's share may well miss the mask */
        dm_commit_nothing_kept(o);
        goto done;
    }
    dm_commit_dict_facts facts;
    dm_commit_dict_facts_make(&t, &g, (unsigned)dirs.n, &dopt, threads, &facts);
    const double t_dict = dm_now_seconds() - t1;
    t1 = dm_now_seconds();
    dm_outdir od;
    if (dm_outdir_begin(&od, o->out, DM_OUTDIR_REPLACE) != 0) goto done;
    int wr = dm_commit_dict_save(od.path, &facts, &d, (long)first, (long)end);
    if (wr == 0) {
        dm_provenance_str(prov, DM_PROV_RESULT, "stage", "dictionary");
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)t.count);
        if (input_of) dm_commit_clustering_provenance(prov, o, ninput, t.count, t_clust);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamline_first", (double)first);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamline_end", (double)end);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines_kept", (double)d.nkept);
        dm_provenance_num(prov, DM_PROV_RESULT, "segments", (double)d.nseg);
        dm_provenance_num(prov, DM_PROV_RESULT, "lut_directions", (double)dirs.n);
        if (dm_commit_blur_on(&dopt))
            dm_provenance_num(prov, DM_PROV_RESULT, "blur_copies",
                              (double)dm_commit_blur_copies(&dopt, NULL, NULL, NULL));
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_load", t_load);
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_dictionary", t_dict);
        dm_provenance_str(prov, DM_PROV_RESULT, "dictionary_device", gpu ? "gpu" : "cpu");
        dm_provenance_str(prov, DM_PROV_RESULT, "device", gpu ? dm_commit_gpu_device(gpu) : "cpu");
        dm_provenance_num(prov, DM_PROV_RESULT, "seconds_write", dm_now_seconds() - t1);
        char *path = dm_path_join(od.path, "provenance.json");
        wr = dm_provenance_write(prov, path);
        free(path);
    }
    if (wr == 0 && o->part.n > 0) { /* last: a part stopped before this leaves no manifest */
        static const dm_part_rule rules[] = {{DM_COMMIT_DICT_RECORDS, DM_MERGE_CONCAT},
                                             {DM_COMMIT_DICT_HEADER, DM_MERGE_SAME}};
        char *command = dm_part_command();
        dm_part_info info = {.command = command};
        wr = dm_part_write(od.path, &o->part, &info, rules, 2);
        free(command);
    }
    if (wr != 0) {
        dm_outdir_abort(&od);
        goto done;
    }
    if (dm_outdir_commit(&od) != 0) goto done;
    sum->streamlines = t.count;
    sum->first = (long)first;
    sum->end = (long)end;
    sum->kept = d.nkept;
    sum->segments = d.nseg;
    sum->seconds = dm_now_seconds() - t0;
    rc = 0;
done:
    dm_gpu_probe_end(&probe, NULL); /* ended already, or an error came first */
    dm_commit_gpu_close(gpu);
    free(input_of);
    free(cluster_of);
    free(blur_apply);
    free(mask);
    dm_commit_dict_free(&d);
    dm_commit_dirs_free(&dirs);
    dm_volume_free(&maskvol);
    dm_volume_free(&data);
    dm_tck_free(&t);
    return rc;
}


int dm_commit_command(const dm_commit_options *o, dm_provenance *prov, dm_commit_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    const int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    if (o->stage_dictionary) return dictionary_stage(o, threads, prov, sum);
    /* the GPU's program made for the data's volumes, read from its header (a header that
     * cannot be read is reported by the data's read) */
    dm_volume head = {0};
    int volumes = 0;
    if (!o->model.scalar && dm_volume_read_header(o->data, &head) == 0) volumes = head.nt;
    dm_volume_free(&head);
    file_source files = {0};
    dm_commit_source src = {.user = &files,
                            .volumes = volumes,
                            .data = src_data,
                            .free_data = src_free_data,
                            .tracks = src_tracks,
                            .pulses = src_pulses,
                            .peaks = src_peaks,
                            .values = src_values,
                            .image = src_image,
                            .dictionary = src_dictionary,
                            .release = src_release};
    file_sink out = {.o = o};
    dm_commit_sink sink = {sink_compartments, sink_errors, &out};
    if (dm_commit_run(o, &src, &sink, NULL, prov, sum) != 0) {
        sink_abort(&out);
        return -1;
    }
    char *path = dm_path_join(out.od.path, "provenance.json");
    int wr = path ? dm_provenance_write(prov, path) : -1;
    free(path);
    if (wr != 0) {
        sink_abort(&out);
        return -1;
    }
    return dm_outdir_commit(&out.od);
}
