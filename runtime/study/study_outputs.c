/* One run's derivatives, sidecars, quality figures and pictures; the output folder's
 * dataset_description.json (see study_outputs.h). */
#define _GNU_SOURCE
#include "study/study_outputs.h"
#include "io/volume.h"
#include "render/fod_glyphs.h"
#include "render/png_write.h"
#include "render/slices.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double dm_study_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dm_study_label(const char *name, char *buf, int n)
{
    int k = 0;
    for (const char *p = name; *p && k < n - 1; p++)
        if (isalnum((unsigned char)*p)) buf[k++] = *p;
    buf[k] = 0;
}

/* A JSON text built in memory, written through a temporary name. */
typedef struct jfile {
    char *buf;
    size_t len;
    FILE *f;
    dm_json j;
} jfile;

static void jf_begin(jfile *jf)
{
    memset(jf, 0, sizeof *jf);
    jf->f = open_memstream(&jf->buf, &jf->len);
    dm_json_begin(&jf->j, jf->f);
}

static int jf_write(jfile *jf, const char *path)
{
    dm_json_end(&jf->j);
    int rc = fclose(jf->f) == 0 ? 0 : dm_set_error("%s: out of memory", path);
    if (rc == 0) rc = dm_write_file_atomic(path, jf->buf, jf->len);
    free(jf->buf);
    return rc;
}

/* A value read by jansson written again through dm_json (key NULL inside arrays). */
static void json_embed(dm_json *j, const char *key, json_t *v)
{
    if (json_is_object(v)) {
        dm_json_key_object(j, key);
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m) json_embed(j, k, m);
        dm_json_close(j);
    } else if (json_is_array(v)) {
        dm_json_key_array(j, key);
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m) json_embed(j, NULL, m);
        dm_json_close(j);
    } else if (json_is_string(v)) {
        dm_json_str(j, key, json_string_value(v));
    } else if (json_is_integer(v)) {
        dm_json_int(j, key, json_integer_value(v));
    } else if (json_is_real(v)) {
        dm_json_num(j, key, json_real_value(v));
    } else if (json_is_boolean(v)) {
        dm_json_bool(j, key, json_is_true(v));
    } else {
        dm_json_num(j, key, NAN); /* null */
    }
}

int dm_study_description(const char *output_dir, const char *pipeline, const char *version,
                         const char *command_line, const char *bids_root)
{
    char *path = dm_path_join(output_dir, "dataset_description.json");
    char name[160];
    snprintf(name, sizeof name, "dimoc %s", pipeline);
    json_error_t je;
    json_t *old = json_load_file(path, 0, &je);
    int rc = 0;
    if (old) {
        json_t *gen = json_array_get(json_object_get(old, "GeneratedBy"), 0);
        const char *oname = json_string_value(json_object_get(old, "Name"));
        const char *over = json_string_value(json_object_get(gen, "Version"));
        if (!oname || strncmp(oname, "dimoc ", 6))
            rc = dm_set_error("%s: the output folder holds another program's derivatives (Name "
                              "'%s'); give another OUTPUT_DIR",
                              path, oname ? oname : "?");
        else if (strcmp(oname, name) || !over || strcmp(over, version))
            rc = dm_set_error("%s: the output folder holds the outputs of %s, version %s, not "
                              "of %s, version %s; give another OUTPUT_DIR",
                              path, oname, over ? over : "?", name, version);
        json_decref(old);
        free(path);
        return rc;
    }
    if (access(path, F_OK) == 0) {
        rc = dm_set_error("%s: not JSON (line %d: %s)", path, je.line, je.text);
        free(path);
        return rc;
    }
    jfile jf;
    jf_begin(&jf);
    dm_json *j = &jf.j;
    dm_json_str(j, "Name", name);
    dm_json_str(j, "BIDSVersion", "1.9.0");
    dm_json_str(j, "DatasetType", "derivative");
    dm_json_key_array(j, "GeneratedBy");
    dm_json_key_object(j, NULL);
    dm_json_str(j, "Name", "dimoc");
    dm_json_str(j, "Version", version);
    dm_json_str(j, "Description", command_line);
    dm_json_close(j);
    dm_json_close(j);
    dm_json_key_array(j, "SourceDatasets");
    dm_json_key_object(j, NULL);
    char *url = NULL;
    if (asprintf(&url, "file://%s", bids_root) < 0) url = NULL;
    dm_json_str(j, "URL", url);
    free(url);
    dm_json_close(j);
    dm_json_close(j);
    rc = jf_write(&jf, path);
    free(path);
    return rc;
}

/* An image file's stem and ending ("NDI.nii.gz" -> "NDI", ".nii.gz"); 0 when not an image. */
static int image_name(const char *name, char *stem, size_t n, const char **ending)
{
    static const char *const ends[] = {".nii.gz", ".nii", ".mif.gz", ".mif", NULL};
    size_t len = strlen(name);
    for (int i = 0; ends[i]; i++) {
        size_t m = strlen(ends[i]);
        if (len > m && !strcmp(name + len - m, ends[i])) {
            snprintf(stem, n, "%.*s", (int)(len - m), name);
            *ending = ends[i];
            return 1;
        }
    }
    return 0;
}

/* The maps of a final stage: every image but the status map, the predicted signal and the
 * samples. */
static int is_map(const char *stem)
{
    size_t n = strlen(stem);
    return strcmp(stem, "status") && strcmp(stem, "predicted") &&
           !(n > 8 && !strcmp(stem + n - 8, "_samples"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A hard link, or a copy where links are impossible; 0 or -1 naming `to`. */
static int link_or_copy(const char *from, const char *to)
{
    unlink(to);
    if (link(from, to) == 0) return 0;
    size_t len;
    char *bytes = dm_read_file(from, &len);
    if (!bytes) return -1;
    int rc = dm_write_file_atomic(to, bytes, len);
    free(bytes);
    return rc;
}

/* The k-th smallest of a[0..n) (k < n), the others rearranged around it (quickselect). */
static double kth_smallest(double *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = a[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                double t = a[i];
                a[i] = a[j], a[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

/* The median of volume 0 over the mask's finite values (NaN when none): the middle value, or
 * the mean of the two middle values, as a sort would give them. */
static double median_in(const dm_volume *v, const dm_volume *mask)
{
    size_t n = DM_NVOX(v), k = 0;
    double *vals = malloc((n ? n : 1) * sizeof *vals);
    for (size_t i = 0; i < n; i++)
        if (mask->data[i] != 0 && isfinite(v->data[i])) vals[k++] = v->data[i];
    double m = NAN;
    if (k) {
        double upper = kth_smallest(vals, k, k / 2); /* everything before it is <= it */
        if (k % 2) {
            m = upper;
        } else {
            double lower = vals[0];
            for (size_t i = 1; i < k / 2; i++)
                if (vals[i] > lower) lower = vals[i];
            m = 0.5 * (lower + upper);
        }
    }
    free(vals);
    return m;
}

/* The quick-look picture of a map as `dimoc view` draws it by default: FOD glyphs for an SH
 * image of lmax 4 or more, direction colour for three volumes, else volume 0 in grey. */
static int picture(const char *path, const dm_volume *v)
{
    dm_picture pic = {0};
    dm_slices_settings s = {0};
    int rc;
    if (v->nt >= 15 && dm_is_sh_count(v->nt)) {
        rc = dm_render_fod_glyphs(v, 0, &pic);
    } else {
        if (v->nt == 3)
            s.dyads = v;
        else
            s.scalar = v;
        rc = dm_render_slices(&s, &pic);
    }
    if (rc == 0) rc = dm_png_write(path, pic.width, pic.height, pic.channels, pic.pixels);
    dm_picture_free(&pic);
    return rc;
}

static char *joinf(const char *dir, const char *fmt, const char *a, const char *b, const char *c)
{
    char *name = NULL, *path;
    if (asprintf(&name, fmt, a, b, c) < 0) return NULL;
    path = dm_path_join(dir, name);
    free(name);
    return path;
}

int dm_study_write_run(const dm_study_run_out *r)
{
    double t0 = dm_study_now();
    char model_label[128];
    dm_study_label(r->model, model_label, sizeof model_label);
    int rc = 0;

    /* The mask: the dataset's copied in, or dimoc's already there. */
    char *mask_out = joinf(r->dwi_dir, "%s_space-dwi_desc-brain_mask%s%s", r->prefix,
                           strstr(r->mask, ".nii.gz") ? ".nii.gz" : ".nii", "");
    if (strcmp(mask_out, r->mask)) {
        size_t len;
        char *bytes = dm_read_file(r->mask, &len);
        rc = bytes ? dm_write_file_atomic(mask_out, bytes, len) : -1;
        free(bytes);
    }
    dm_volume mask = {0};
    if (rc == 0) rc = dm_volume_read(mask_out, &mask);
    size_t in_mask = 0;
    for (size_t i = 0; rc == 0 && i < DM_NVOX(&mask); i++) in_mask += mask.data[i] != 0;
    if (rc == 0) {
        char *side = joinf(r->dwi_dir, "%s_space-dwi_desc-brain_mask.json", r->prefix, "", "");
        jfile jf;
        jf_begin(&jf);
        dm_json_str(&jf.j, "Source", r->mask_source ? r->mask_source : "dimoc mask");
        rc = jf_write(&jf, side);
        free(side);
    }
    if (rc == 0) {
        char *png = joinf(r->figures_dir, "%s_space-dwi_desc-brain_mask.png", r->prefix, "", "");
        rc = picture(png, &mask);
        free(png);
    }
    free(mask_out);

    /* The final stage's provenance, embedded in every sidecar. */
    char *prov_path = dm_path_join(r->final_dir, "provenance.json");
    json_error_t je;
    json_t *prov = rc == 0 ? json_load_file(prov_path, 0, &je) : NULL;
    if (rc == 0 && !prov) rc = dm_set_error("%s: cannot be read as JSON (%s)", prov_path, je.text);
    free(prov_path);

    /* The maps, sorted by name. */
    int n = 0, cap = 16;
    char **names = malloc(cap * sizeof *names);
    DIR *d = rc == 0 ? opendir(r->final_dir) : NULL;
    if (rc == 0 && !d) rc = dm_set_error("cannot read %s: %s", r->final_dir, strerror(errno));
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char stem[256];
        const char *ending;
        if (e->d_name[0] == '.' || !image_name(e->d_name, stem, sizeof stem, &ending)) continue;
        if (n == cap) names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, n, sizeof *names, cmp_str);

    dm_volume status = {0};
    int have_status = 0;
    double residual = NAN;
    jfile qc;
    jf_begin(&qc);
    /* "medians" is filled as the maps are read; the counts come first in the file, so the
     * medians are kept aside until then. */
    char **med_key = calloc((size_t)n + 1, sizeof *med_key);
    double *med_val = calloc((size_t)n + 1, sizeof *med_val);
    int nmed = 0;
    /* First in turn: the status, the residual, each map's link and sidecar (cheap); then each
     * map's reading, median and picture on all cores (a UK Biobank subject's ten maps took
     * about 0.5 s one after the other), kept in the maps' order. */
    typedef struct map_job {
        char *img, *png, key[400];
        int has_median, rc;
        double median;
        char error[512];
    } map_job;
    map_job *jobs = calloc((size_t)n + 1, sizeof *jobs);
    int njobs = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        char stem[256], label[256];
        const char *ending;
        image_name(names[i], stem, sizeof stem, &ending);
        char *from = dm_path_join(r->final_dir, names[i]);
        if (!strcmp(stem, "status")) {
            rc = dm_volume_read(from, &status);
            if (rc == 0) rc = dm_volume_check_same_grid(&status, from, &mask, r->mask);
            have_status = rc == 0;
            free(from);
            continue;
        }
        if (!strcmp(stem, "SSE") || !strcmp(stem, "sse") || !strcmp(stem, "residual")) {
            dm_volume v;
            rc = dm_volume_read(from, &v);
            if (rc == 0) residual = median_in(&v, &mask);
            dm_volume_free(&v);
        }
        if (rc != 0 || !is_map(stem)) {
            free(from);
            continue;
        }
        dm_study_label(stem, label, sizeof label);
        char *base = NULL;
        if (asprintf(&base, "%s_space-dwi_model-%s_param-%s_dwimap", r->prefix, model_label,
                     label) < 0)
            base = NULL;
        map_job *mj = &jobs[njobs++];
        mj->img = joinf(r->dwi_dir, "%s%s", base, ending, "");
        mj->png = joinf(r->figures_dir, "%s.png", base, "", "");
        snprintf(mj->key, sizeof mj->key, "%s_%s", model_label, label);
        char *side = joinf(r->dwi_dir, "%s.json", base, "", "");
        rc = link_or_copy(from, mj->img);
        if (rc == 0) {
            jfile jf;
            jf_begin(&jf);
            dm_json_str(&jf.j, "Model", r->model);
            dm_json_str(&jf.j, "Parameter", stem);
            dm_json_str(&jf.j, "Pipeline", r->pipeline);
            dm_json_key_array(&jf.j, "Sources");
            for (int k = 0; k < 4; k++) dm_json_str(&jf.j, NULL, r->sources[k]);
            dm_json_close(&jf.j);
            json_embed(&jf.j, "dimoc", prov);
            rc = jf_write(&jf, side);
        }
        free(base), free(side), free(from);
    }
#pragma omp parallel for schedule(dynamic, 1) if (rc == 0 && njobs > 1)
    for (int i = 0; i < njobs; i++) {
        map_job *mj = &jobs[i];
        dm_volume v = {0};
        if (rc != 0) continue;
        mj->rc = dm_volume_read(mj->img, &v);
        if (mj->rc == 0) mj->rc = dm_volume_check_same_grid(&v, mj->img, &mask, r->mask);
        if (mj->rc == 0 && (v.nt == 1 || (v.nt >= 6 && dm_is_sh_count(v.nt)))) {
            mj->has_median = 1;
            mj->median = median_in(&v, &mask);
        }
        if (mj->rc == 0) mj->rc = picture(mj->png, &v);
        if (mj->rc != 0) snprintf(mj->error, sizeof mj->error, "%s", dm_last_error());
        dm_volume_free(&v);
    }
    for (int i = 0; i < njobs; i++) {
        map_job *mj = &jobs[i];
        if (rc == 0 && mj->rc != 0) rc = dm_set_error("%s", mj->error);
        if (rc == 0 && mj->has_median) {
            med_key[nmed] = strdup(mj->key);
            med_val[nmed++] = mj->median;
        }
        free(mj->img), free(mj->png);
    }
    free(jobs);
    json_decref(prov);

    /* The tractogram, under a derivative name too. */
    if (rc == 0 && r->tracks) {
        const char *dot = strrchr(r->tracks, '.');
        char *to = joinf(r->dwi_dir, "%s_space-dwi_model-%s_tractography%s", r->prefix, model_label,
                         dot ? dot : ".tck");
        rc = link_or_copy(r->tracks, to);
        free(to);
    }

    size_t fitted = 0;
    for (size_t i = 0; have_status && i < DM_NVOX(&mask); i++)
        fitted += mask.data[i] != 0 && status.data[i] == 1;
    if (!have_status) fitted = in_mask; /* no status map: every voxel counts as fitted */
    double t_end = dm_study_now();

    dm_json *j = &qc.j;
    dm_json_str(j, "subject", r->subject);
    if (r->session)
        dm_json_str(j, "session", r->session);
    else
        dm_json_num(j, "session", NAN);
    dm_json_str(j, "run_prefix", r->prefix);
    dm_json_str(j, "pipeline", r->pipeline);
    dm_json_int(j, "voxels_in_mask", (long long)in_mask);
    dm_json_int(j, "fitted", (long long)fitted);
    dm_json_int(j, "flagged", (long long)(in_mask - fitted));
    dm_json_num(j, "residual_median", residual);
    dm_json_key_object(j, "medians");
    for (int i = 0; i < nmed; i++) dm_json_num(j, med_key[i], med_val[i]);
    dm_json_close(j);
    dm_json_key_object(j, "seconds");
    dm_json_num(j, "read", r->seconds_read);
    dm_json_num(j, "stages", r->seconds_stages);
    dm_json_num(j, "plan", r->seconds_plan);
    dm_json_num(j, "fit", r->seconds_fit);
    dm_json_num(j, "finish", r->seconds_finish);
    dm_json_num(j, "write", t_end - t0);
    dm_json_num(j, "total", t_end - r->started);
    dm_json_close(j);
    if (rc == 0) {
        char *path = joinf(r->dwi_dir, "%s_qc.json", r->prefix, "", "");
        rc = jf_write(&qc, path);
        free(path);
    } else {
        dm_json_end(j);
        fclose(qc.f);
        free(qc.buf);
    }
    for (int i = 0; i < nmed; i++) free(med_key[i]);
    free(med_key), free(med_val);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    dm_volume_free(&status);
    dm_volume_free(&mask);
    return rc;
}
