/* The group level of the BIDS App: every run's P_qc.json under OUTPUT_DIR/sub-X/[ses-Y/]dwi/
 * read (jansson) and checked, the runs' figures in one table with robust z-scores per
 * pipeline, written as group/dimoc_qc.tsv, its column descriptions group/dimoc_qc.json and
 * the page group/dimoc_report.html (report_html.c), all three renamed into place together. */
#define _GNU_SOURCE
#include "study/qc_group.h"
#include "study/report_html.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The consistency factor that makes the MAD of normal data an estimate of its sigma. */
#define MAD_TO_SIGMA 1.4826

/* The figures every run has, before its medians; seconds_total comes after them. */
static const char *const fixed_figures[] = {"voxels_in_mask", "fitted", "flagged",
                                            "flagged_fraction", "residual_median"};
enum { FIG_VOXELS, FIG_FITTED, FIG_FLAGGED, FIG_FRACTION, FIG_RESIDUAL, N_FIXED };
_Static_assert(N_FIXED == DM_QC_FIXED_FIGURES, "report_html.h counts the fixed figures");

typedef struct median_entry {
    char *key;
    double value;
} median_entry;

/* A qc file as read, before the table's columns are known. */
typedef struct parsed_run {
    char *subject, *session, *run_prefix, *pipeline;
    char *folder; /* "sub-01/ses-1/dwi", from OUTPUT_DIR */
    double fixed[N_FIXED], seconds_total;
    median_entry *median;
    int n_median;
    int order; /* the order found: subject, session, file name */
} parsed_run;

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_strings(char **s, int n)
{
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
}

/* The entries of a folder but . and .., sorted; -1 with dm_last_error() when it cannot be
 * read. */
static int list_folder(const char *path, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d) return dm_set_error("cannot read folder %s: %s", path, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **bigger = realloc(*names, (size_t)cap * sizeof **names);
            if (!bigger) break;
            *names = bigger;
        }
        if (!((*names)[*n] = strdup(e->d_name))) break;
        (*n)++;
    }
    int failed = e != NULL;
    closedir(d);
    if (failed) {
        free_strings(*names, *n);
        *names = NULL;
        *n = 0;
        return dm_set_error("out of memory");
    }
    if (*n) qsort(*names, (size_t)*n, sizeof **names, compare_strings);
    return 0;
}

static int ends_with(const char *s, const char *end)
{
    size_t ls = strlen(s), le = strlen(end);
    return ls >= le && !strcmp(s + ls - le, end);
}

static int starts_with(const char *s, const char *start)
{
    return !strncmp(s, start, strlen(start));
}

static char *str_printf(const char *fmt, ...) DM_PRINTF(1, 2);
static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

/* ---- reading one qc file ---- */

/* A text fit for a TSV cell and a file name: not empty, no control characters. */
static int plain_text(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 0;
    return 1;
}

static int isalnum_ascii(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A medians key becomes a column name: letters, digits, '_', '-', '.'. */
static int plain_key(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!(isalnum_ascii(*s) || *s == '_' || *s == '-' || *s == '.')) return 0;
    return 1;
}

/* The member `key` as a string (null allowed when may_be_null: *out NULL); 0, or -1 with why. */
static int get_text(json_t *root, const char *key, int may_be_null, const char **out, char *why,
                    size_t wn)
{
    json_t *v = json_object_get(root, key);
    *out = NULL;
    if (!v) return snprintf(why, wn, "\"%s\" is missing", key), -1;
    if (may_be_null && json_is_null(v)) return 0;
    if (!json_is_string(v))
        return snprintf(why, wn, "\"%s\" is not a string%s", key, may_be_null ? " or null" : ""),
               -1;
    if (!plain_text(json_string_value(v)))
        return snprintf(why, wn, "\"%s\" is empty or holds control characters", key), -1;
    *out = json_string_value(v);
    return 0;
}

static int get_count(json_t *root, const char *key, double *out, char *why, size_t wn)
{
    json_t *v = json_object_get(root, key);
    if (!v) return snprintf(why, wn, "\"%s\" is missing", key), -1;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return snprintf(why, wn, "\"%s\" is not a whole number >= 0", key), -1;
    *out = (double)json_integer_value(v);
    return 0;
}

/* A number, or null (NaN) where may_be_null. */
static int get_number(json_t *obj, const char *where, const char *key, int may_be_null, double *out,
                      char *why, size_t wn)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return snprintf(why, wn, "\"%s%s\" is missing", where, key), -1;
    if (may_be_null && json_is_null(v)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(v))
        return snprintf(why, wn, "\"%s%s\" is not a number%s", where, key,
                        may_be_null ? " or null" : ""),
               -1;
    *out = json_number_value(v);
    return 0;
}

static void free_parsed(parsed_run *r)
{
    free(r->subject);
    free(r->session);
    free(r->run_prefix);
    free(r->pipeline);
    free(r->folder);
    for (int i = 0; i < r->n_median; i++) free(r->median[i].key);
    free(r->median);
    memset(r, 0, sizeof *r);
}

/* Checks a qc file's content against the contract and the place it was found (subject and
 * session folders, file name); fills r.  0, or -1 with why (r then freed). */
static int parse_qc(json_t *root, const char *subject, const char *session, const char *file,
                    parsed_run *r, char *why, size_t wn)
{
    memset(r, 0, sizeof *r);
    if (!json_is_object(root)) return snprintf(why, wn, "not a JSON object"), -1;
    const char *subj, *ses, *prefix, *pipeline;
    if (get_text(root, "subject", 0, &subj, why, wn) ||
        get_text(root, "session", 1, &ses, why, wn) ||
        get_text(root, "run_prefix", 0, &prefix, why, wn) ||
        get_text(root, "pipeline", 0, &pipeline, why, wn))
        return -1;
    if (strcmp(subj, subject))
        return snprintf(why, wn, "\"subject\" is \"%s\" in the folder of sub-%s", subj, subject),
               -1;
    if (session && (!ses || strcmp(ses, session)))
        return snprintf(why, wn, "\"session\" is %s%s%s in the folder of ses-%s", ses ? "\"" : "",
                        ses ? ses : "null", ses ? "\"" : "", session),
               -1;
    if (!session && ses)
        return snprintf(why, wn, "\"session\" is \"%s\" in a folder of no session", ses), -1;
    size_t lp = strlen(prefix);
    if (strncmp(file, prefix, lp) || strcmp(file + lp, "_qc.json"))
        return snprintf(why, wn, "\"run_prefix\" \"%s\" does not name the file", prefix), -1;
    size_t ls = strlen(subject);
    if (!starts_with(prefix, "sub-") || strncmp(prefix + 4, subject, ls) ||
        (prefix[4 + ls] != '_' && prefix[4 + ls] != '\0'))
        return snprintf(why, wn, "\"run_prefix\" \"%s\" is not of sub-%s", prefix, subject), -1;

    double *fx = r->fixed;
    if (get_count(root, "voxels_in_mask", &fx[FIG_VOXELS], why, wn) ||
        get_count(root, "fitted", &fx[FIG_FITTED], why, wn) ||
        get_count(root, "flagged", &fx[FIG_FLAGGED], why, wn) ||
        get_number(root, "", "residual_median", 1, &fx[FIG_RESIDUAL], why, wn))
        return -1;
    if (fx[FIG_FITTED] + fx[FIG_FLAGGED] > fx[FIG_VOXELS])
        return snprintf(why, wn,
                        "\"fitted\" (%.0f) and \"flagged\" (%.0f) add up to more than "
                        "\"voxels_in_mask\" (%.0f)",
                        fx[FIG_FITTED], fx[FIG_FLAGGED], fx[FIG_VOXELS]),
               -1;
    /* flagged: the mask's voxels whose fit did not end well (fitted + flagged = the mask) */
    fx[FIG_FRACTION] = fx[FIG_VOXELS] > 0 ? fx[FIG_FLAGGED] / fx[FIG_VOXELS] : NAN;

    json_t *seconds = json_object_get(root, "seconds");
    if (!json_is_object(seconds)) return snprintf(why, wn, "\"seconds\" is not an object"), -1;
    if (get_number(seconds, "seconds.", "total", 0, &r->seconds_total, why, wn)) return -1;
    if (!(r->seconds_total >= 0)) return snprintf(why, wn, "\"seconds.total\" is negative"), -1;

    json_t *medians = json_object_get(root, "medians");
    if (!json_is_object(medians)) return snprintf(why, wn, "\"medians\" is not an object"), -1;
    size_t n = json_object_size(medians);
    r->median = calloc(n ? n : 1, sizeof *r->median);
    if (!r->median) return snprintf(why, wn, "out of memory"), -1;
    const char *key;
    json_t *value;
    json_object_foreach(medians, key, value)
    {
        if (!plain_key(key)) {
            snprintf(why, wn, "\"medians\" has the key \"%.60s\" (letters, digits, _ - . only)",
                     key);
            goto fail;
        }
        double v;
        if (get_number(medians, "medians.", key, 1, &v, why, wn)) goto fail;
        median_entry *m = &r->median[r->n_median];
        if (!(m->key = strdup(key))) goto fail;
        m->value = v;
        r->n_median++;
    }
    r->subject = strdup(subj);
    r->session = ses ? strdup(ses) : NULL;
    r->run_prefix = strdup(prefix);
    r->pipeline = strdup(pipeline);
    if (!r->subject || (ses && !r->session) || !r->run_prefix || !r->pipeline) {
        snprintf(why, wn, "out of memory");
        goto fail;
    }
    return 0;
fail:
    free_parsed(r);
    return -1;
}

/* ---- finding the qc files ---- */

typedef struct gathered {
    parsed_run *run;
    int n_runs, cap;
    char **skipped;
    int n_skipped;
    int n_found; /* qc files found, read or not */
} gathered;

static int add_skipped(gathered *g, const char *path, const char *why)
{
    char **bigger = realloc(g->skipped, (size_t)(g->n_skipped + 1) * sizeof *g->skipped);
    if (!bigger) return dm_set_error("out of memory");
    g->skipped = bigger;
    if (!(g->skipped[g->n_skipped] = str_printf("%s: %s", path, why)))
        return dm_set_error("out of memory");
    g->n_skipped++;
    /* One line per file, as it is met; the call's error says how many. */
    dm_warn("%s: %s; left out of the group table", path, why);
    return 0;
}

/* Reads the qc files of one dwi folder ("sub-01/ses-1/dwi" under out). */
static int read_dwi_folder(gathered *g, const char *out, const char *folder, const char *subject,
                           const char *session)
{
    char *dir = dm_path_join(out, folder);
    if (!dir) return dm_set_error("out of memory");
    if (!is_dir(dir)) {
        free(dir);
        return 0;
    }
    char **names;
    int n;
    int rc = list_folder(dir, &names, &n);
    for (int i = 0; rc == 0 && i < n; i++) {
        if (names[i][0] == '.' || !ends_with(names[i], "_qc.json")) continue;
        g->n_found++;
        char *path = dm_path_join(dir, names[i]);
        if (!path) {
            rc = dm_set_error("out of memory");
            break;
        }
        char why[512];
        json_error_t jerr;
        json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        parsed_run r;
        int bad;
        if (!root) {
            if (jerr.line > 0)
                snprintf(why, sizeof why, "not valid JSON at line %d: %s", jerr.line, jerr.text);
            else
                snprintf(why, sizeof why, "not valid JSON: %s", jerr.text);
            bad = 1;
        } else {
            bad = parse_qc(root, subject, session, names[i], &r, why, sizeof why) != 0;
            json_decref(root);
        }
        if (bad) {
            rc = add_skipped(g, path, why);
        } else if (g->n_runs == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 16;
            parsed_run *bigger = realloc(g->run, (size_t)g->cap * sizeof *g->run);
            if (!bigger) {
                free_parsed(&r);
                rc = dm_set_error("out of memory");
            } else {
                g->run = bigger;
            }
        }
        if (!bad && rc == 0) {
            r.folder = strdup(folder);
            r.order = g->n_runs;
            g->run[g->n_runs++] = r;
        }
        free(path);
    }
    free_strings(names, n);
    free(dir);
    return rc;
}

/* Every sub-X/dwi and sub-X/ses-Y/dwi under out, in sorted order. */
static int gather(gathered *g, const char *out)
{
    char **subs;
    int ns;
    if (list_folder(out, &subs, &ns)) return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < ns; i++) {
        char *subdir = dm_path_join(out, subs[i]);
        if (!starts_with(subs[i], "sub-") || !subs[i][4] || !subdir || !is_dir(subdir)) {
            free(subdir);
            continue;
        }
        const char *subject = subs[i] + 4;
        char *folder = str_printf("%s/dwi", subs[i]);
        rc =
            folder ? read_dwi_folder(g, out, folder, subject, NULL) : dm_set_error("out of memory");
        free(folder);
        char **sess;
        int nses;
        if (rc == 0 && list_folder(subdir, &sess, &nses) == 0) {
            for (int k = 0; rc == 0 && k < nses; k++) {
                if (!starts_with(sess[k], "ses-") || !sess[k][4]) continue;
                folder = str_printf("%s/%s/dwi", subs[i], sess[k]);
                rc = folder ? read_dwi_folder(g, out, folder, subject, sess[k] + 4)
                            : dm_set_error("out of memory");
                free(folder);
            }
            free_strings(sess, nses);
        }
        free(subdir);
    }
    free_strings(subs, ns);
    return rc;
}

/* ---- the table ---- */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n-1] (sorted in place), NaN when n is 0. */
static double median_of(double *v, int n)
{
    if (n == 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Per pipeline and figure: median, MAD and every run's robust z. */
static int robust_z(dm_qc_table *t)
{
    int nf = t->n_figures;
    double *v = malloc((size_t)(t->n_runs ? t->n_runs : 1) * sizeof *v);
    t->center = malloc((size_t)(t->n_pipelines * nf) * sizeof *t->center);
    t->spread = malloc((size_t)(t->n_pipelines * nf) * sizeof *t->spread);
    if (!v || !t->center || !t->spread) {
        free(v);
        return dm_set_error("out of memory");
    }
    for (int p = 0; p < t->n_pipelines; p++) {
        for (int f = 0; f < nf; f++) {
            int n = 0;
            for (int i = 0; i < t->n_runs; i++)
                if (t->run[i].pipeline_index == p && !isnan(t->run[i].value[f]))
                    v[n++] = t->run[i].value[f];
            double med = median_of(v, n);
            for (int k = 0; k < n; k++) v[k] = fabs(v[k] - med);
            double mad = median_of(v, n);
            t->center[p * nf + f] = med;
            t->spread[p * nf + f] = mad;
            for (int i = 0; i < t->n_runs; i++) {
                dm_qc_run *r = &t->run[i];
                if (r->pipeline_index != p) continue;
                double x = r->value[f], z;
                if (isnan(x))
                    z = NAN;
                else if (mad > 0)
                    z = (x - med) / (MAD_TO_SIGMA * mad);
                else /* most runs agree exactly: any other value is beyond every limit */
                    z = x == med ? 0.0 : copysign(INFINITY, x - med);
                r->z[f] = z;
                if (fabs(z) > t->z_limit) r->n_beyond++;
            }
        }
    }
    free(v);
    return 0;
}

/* Adds s to a sorted set of strings (copied); 0 or -1. */
static int set_add(char ***set, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp((*set)[i], s)) return 0;
    char **bigger = realloc(*set, (size_t)(*n + 1) * sizeof **set);
    if (!bigger) return -1;
    *set = bigger;
    if (!((*set)[*n] = strdup(s))) return -1;
    (*n)++;
    qsort(*set, (size_t)*n, sizeof **set, compare_strings);
    return 0;
}

static int set_index(char **set, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(set[i], s)) return i;
    return -1;
}

/* A PNG that can be shown: a regular file that starts with the PNG signature. */
static int png_present(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char sig[8];
    int ok = fread(sig, 1, 8, f) == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8);
    fclose(f);
    return ok;
}

/* Adds the picture `name` (both arguments malloc'd, taken): found in sub-X/figures/, or for a
 * run of a session in sub-X/ses-Y/figures/; listed by the first path when in neither. */
static int add_picture(dm_qc_run *r, const char *out, char *name, char *caption)
{
    char *path = NULL, *other = NULL;
    if (name && caption) {
        path = str_printf("sub-%s/figures/%s", r->subject, name);
        if (r->session)
            other = str_printf("sub-%s/ses-%s/figures/%s", r->subject, r->session, name);
    }
    free(name);
    if (!path || (r->session && !other)) {
        free(path);
        free(other);
        free(caption);
        return dm_set_error("out of memory");
    }
    for (int i = 0; i < r->n_pictures; i++) {
        if (!strcmp(r->picture[i].path, path) || (other && !strcmp(r->picture[i].path, other))) {
            free(path); /* named twice: by a map and by a median */
            free(other);
            free(caption);
            return 0;
        }
    }
    dm_qc_picture *bigger = realloc(r->picture, (size_t)(r->n_pictures + 1) * sizeof *bigger);
    if (!bigger) {
        free(path);
        free(other);
        free(caption);
        return dm_set_error("out of memory");
    }
    r->picture = bigger;
    char *full = dm_path_join(out, path);
    int present = full && png_present(full);
    free(full);
    if (!present && other) {
        full = dm_path_join(out, other);
        if (full && png_present(full)) {
            free(path);
            path = other;
            other = NULL;
            present = 1;
        }
        free(full);
    }
    free(other);
    r->picture[r->n_pictures++] = (dm_qc_picture){path, caption, present};
    return 0;
}

/* The pictures a run should have (sub-X/figures/): its mask's, then one per map in its dwi folder
 * (P_space-dwi_model-M_param-Q_dwimap.nii.gz) and one per median it reports whose map is not
 * there (the key "M_Q": model-M_param-Q, labels having no '_' in BIDS). */
static int find_pictures(dm_qc_run *r, const parsed_run *p, const char *out)
{
    if (add_picture(r, out, str_printf("%s_space-dwi_desc-brain_mask.png", r->run_prefix),
                    strdup("brain mask")))
        return -1;
    char *map_start = str_printf("%s_space-dwi_model-", r->run_prefix);
    char *dir = dm_path_join(out, p->folder);
    char **map_keys = NULL; /* "M_Q" of each map found */
    int n_keys = 0, rc = 0;
    if (!map_start || !dir) rc = dm_set_error("out of memory");
    char **names = NULL;
    int n = 0;
    if (rc == 0 && list_folder(dir, &names, &n) == 0) {
        const char *end = "_dwimap.nii.gz";
        for (int i = 0; rc == 0 && i < n; i++) {
            if (!starts_with(names[i], map_start) || !ends_with(names[i], end)) continue;
            int stem = (int)(strlen(names[i]) - strlen(end));
            const char *model = names[i] + strlen(map_start); /* "M_param-Q_dwimap.nii.gz" */
            const char *param = strstr(model, "_param-");
            int model_len = param ? (int)(param - model) : (int)(names[i] + stem - model);
            int param_len = param ? (int)(names[i] + stem - (param + 7)) : 0;
            const char *param_text = param ? param + 7 : "";
            char *key = str_printf("%.*s_%.*s", model_len, model, param_len, param_text);
            if (!key || set_add(&map_keys, &n_keys, key)) rc = dm_set_error("out of memory");
            free(key);
            if (rc == 0)
                rc = add_picture(r, out, str_printf("%.*s_dwimap.png", stem, names[i]),
                                 str_printf("%.*s %.*s", model_len, model, param_len, param_text));
        }
    }
    free_strings(names, n);
    for (int k = 0; rc == 0 && k < p->n_median; k++) {
        const char *key = p->median[k].key, *cut = strchr(key, '_');
        if (!cut || !cut[1] || set_index(map_keys, n_keys, key) >= 0) continue;
        int ml = (int)(cut - key);
        rc = add_picture(r, out,
                         str_printf("%s_space-dwi_model-%.*s_param-%s_dwimap.png", r->run_prefix,
                                    ml, key, cut + 1),
                         str_printf("%.*s %s", ml, key, cut + 1));
    }
    free_strings(map_keys, n_keys);
    free(map_start);
    free(dir);
    /* Any other picture the participant level drew of the run (P_space-..., so that the
     * prefix of another run, P_run-2, does not match). */
    char *pic_start = str_printf("%s_space-", r->run_prefix);
    for (int where = 0; rc == 0 && where < (r->session ? 2 : 1); where++) {
        char *figures = where ? str_printf("%s/sub-%s/ses-%s/figures", out, r->subject, r->session)
                              : str_printf("%s/sub-%s/figures", out, r->subject);
        if (!figures || !pic_start) rc = dm_set_error("out of memory");
        if (rc == 0 && is_dir(figures) && list_folder(figures, &names, &n) == 0) {
            for (int i = 0; rc == 0 && i < n; i++)
                if (starts_with(names[i], pic_start) && ends_with(names[i], ".png"))
                    rc = add_picture(
                        r, out, strdup(names[i]),
                        str_printf("%.*s", (int)(strlen(names[i]) - 4 - strlen(r->run_prefix) - 1),
                                   names[i] + strlen(r->run_prefix) + 1));
            free_strings(names, n);
        }
        free(figures);
    }
    free(pic_start);
    return rc;
}

/* Runs of one pipeline together (pipelines by name), each in the order found. */
static int compare_runs(const void *a, const void *b)
{
    const parsed_run *x = a, *y = b;
    int c = strcmp(x->pipeline, y->pipeline);
    return c ? c : x->order - y->order;
}

static void free_table(dm_qc_table *t)
{
    for (int i = 0; i < t->n_runs; i++) {
        dm_qc_run *r = &t->run[i];
        free(r->subject);
        free(r->session);
        free(r->run_prefix);
        free(r->pipeline);
        free(r->value);
        free(r->z);
        for (int k = 0; k < r->n_pictures; k++) {
            free(r->picture[k].path);
            free(r->picture[k].caption);
        }
        free(r->picture);
    }
    free(t->run);
    free_strings(t->figure, t->n_figures);
    free(t->is_count);
    free_strings(t->pipeline, t->n_pipelines);
    free(t->center);
    free(t->spread);
    free_strings(t->skipped, t->n_skipped);
    memset(t, 0, sizeof *t);
}

/* The table from the runs read (they are moved into it: g keeps none). */
static int build_table(dm_qc_table *t, gathered *g, const char *out)
{
    char **keys = NULL;
    int nk = 0;
    for (int i = 0; i < g->n_runs; i++) {
        if (set_add(&t->pipeline, &t->n_pipelines, g->run[i].pipeline))
            return dm_set_error("out of memory");
        for (int k = 0; k < g->run[i].n_median; k++)
            if (set_add(&keys, &nk, g->run[i].median[k].key)) {
                free_strings(keys, nk);
                return dm_set_error("out of memory");
            }
    }
    t->n_figures = N_FIXED + nk + 1;
    t->figure = calloc((size_t)t->n_figures, sizeof *t->figure);
    t->is_count = calloc((size_t)t->n_figures, sizeof *t->is_count);
    t->run = calloc((size_t)g->n_runs, sizeof *t->run);
    if (!t->figure || !t->is_count || !t->run) {
        free_strings(keys, nk);
        return dm_set_error("out of memory");
    }
    for (int f = 0; f < N_FIXED; f++) t->figure[f] = strdup(fixed_figures[f]);
    for (int k = 0; k < nk; k++) t->figure[N_FIXED + k] = keys[k];
    free(keys);
    t->figure[t->n_figures - 1] = strdup("seconds_total");
    t->is_count[FIG_VOXELS] = t->is_count[FIG_FITTED] = t->is_count[FIG_FLAGGED] = 1;
    for (int f = 0; f < t->n_figures; f++)
        if (!t->figure[f]) return dm_set_error("out of memory");

    qsort(g->run, (size_t)g->n_runs, sizeof *g->run, compare_runs);
    for (int i = 0; i < g->n_runs; i++) {
        parsed_run *p = &g->run[i];
        dm_qc_run *r = &t->run[t->n_runs++];
        r->subject = p->subject;
        r->session = p->session;
        r->run_prefix = p->run_prefix;
        r->pipeline = p->pipeline;
        p->subject = p->session = p->run_prefix = p->pipeline = NULL;
        r->pipeline_index = set_index(t->pipeline, t->n_pipelines, r->pipeline);
        r->value = malloc((size_t)t->n_figures * sizeof *r->value);
        r->z = malloc((size_t)t->n_figures * sizeof *r->z);
        if (!r->value || !r->z) return dm_set_error("out of memory");
        for (int f = 0; f < t->n_figures; f++) r->value[f] = r->z[f] = NAN;
        memcpy(r->value, p->fixed, sizeof p->fixed);
        for (int k = 0; k < p->n_median; k++)
            r->value[set_index(t->figure, t->n_figures, p->median[k].key)] = p->median[k].value;
        r->value[t->n_figures - 1] = p->seconds_total;
        if (find_pictures(r, p, out)) return -1;
    }
    return robust_z(t);
}

/* ---- writing ---- */

static void write_tsv(const dm_qc_table *t, FILE *f)
{
    char b[64];
    fputs("subject\tsession\trun_prefix\tpipeline", f);
    for (int k = 0; k < t->n_figures; k++) fprintf(f, "\t%s", t->figure[k]);
    for (int k = 0; k < t->n_figures; k++) fprintf(f, "\tz_%s", t->figure[k]);
    fputs("\toutlier\n", f);
    for (int i = 0; i < t->n_runs; i++) {
        const dm_qc_run *r = &t->run[i];
        fprintf(f, "%s\t%s\t%s\t%s", r->subject, r->session ? r->session : "n/a", r->run_prefix,
                r->pipeline);
        for (int k = 0; k < t->n_figures; k++)
            fprintf(f, "\t%s", dm_qc_format(b, sizeof b, r->value[k], t->is_count[k]));
        for (int k = 0; k < t->n_figures; k++)
            fprintf(f, "\t%s", dm_qc_format_z(b, sizeof b, r->z[k]));
        fputc('\t', f);
        int listed = 0;
        for (int k = 0; k < t->n_figures; k++)
            if (fabs(r->z[k]) > t->z_limit) fprintf(f, "%s%s", listed++ ? "," : "", t->figure[k]);
        fputs(listed ? "\n" : "none\n", f);
    }
}

/* BIDS's description of each column of the TSV. */
static void write_tsv_sidecar(const dm_qc_table *t, FILE *f)
{
    static const char *const fixed_help[] = {
        "voxels in the run's brain mask",
        "voxels of the mask whose fit ended with status 1",
        "the other voxels of the mask (not converged, at a bound, skipped, failed)",
        "flagged / voxels_in_mask",
        "median over the mask of the fit's residual (n/a: the pipeline reports none)",
    };
    dm_json j;
    dm_json_begin(&j, f);
    dm_json_key_object(&j, "subject");
    dm_json_str(&j, "Description", "participant label (sub-<label>)");
    dm_json_close(&j);
    dm_json_key_object(&j, "session");
    dm_json_str(&j, "Description", "session label (ses-<label>), n/a without sessions");
    dm_json_close(&j);
    dm_json_key_object(&j, "run_prefix");
    dm_json_str(&j, "Description", "the entities of the diffusion run, as in its file names");
    dm_json_close(&j);
    dm_json_key_object(&j, "pipeline");
    dm_json_str(&j, "Description", "the dimoc pipeline that made the run's maps");
    dm_json_close(&j);
    char text[512];
    for (int k = 0; k < t->n_figures; k++) {
        dm_json_key_object(&j, t->figure[k]);
        if (k < N_FIXED)
            dm_json_str(&j, "Description", fixed_help[k]);
        else if (k == t->n_figures - 1)
            dm_json_str(&j, "Description", "seconds the participant level spent on the run");
        else {
            snprintf(text, sizeof text, "median over the brain mask of the map %s", t->figure[k]);
            dm_json_str(&j, "Description", text);
        }
        if (k == t->n_figures - 1) dm_json_str(&j, "Units", "s");
        dm_json_close(&j);
    }
    for (int k = 0; k < t->n_figures; k++) {
        snprintf(text, sizeof text, "z_%s", t->figure[k]);
        dm_json_key_object(&j, text);
        snprintf(text, sizeof text,
                 "robust z-score of %s: (x - median) / (1.4826 * MAD) over the runs of the same "
                 "pipeline; inf or -inf when the MAD is 0 and x is not the median",
                 t->figure[k]);
        dm_json_str(&j, "Description", text);
        dm_json_close(&j);
    }
    dm_json_key_object(&j, "outlier");
    snprintf(text, sizeof text,
             "the figures whose robust z is beyond +-%g, separated by commas; none when there are "
             "none",
             t->z_limit);
    dm_json_str(&j, "Description", text);
    dm_json_close(&j);
    dm_json_end(&j);
}

enum { OUT_TSV, OUT_SIDECAR, OUT_HTML, N_OUT };

/* Writes one of the outputs to its temporary name. */
static int write_one(const dm_qc_table *t, int which, const char *tmp, const char *final)
{
    FILE *f = fopen(tmp, "w");
    if (!f) return dm_set_error("cannot write %s: %s", final, strerror(errno));
    int rc = 0;
    if (which == OUT_TSV)
        write_tsv(t, f);
    else if (which == OUT_SIDECAR)
        write_tsv_sidecar(t, f);
    else
        rc = dm_qc_report_html(t, f);
    int bad = ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad && rc == 0) rc = dm_set_error("cannot write %s: %s", final, strerror(e));
    return rc;
}

static int write_outputs(const dm_qc_table *t, const char *out)
{
    static const char *const names[N_OUT] = {"dimoc_qc.tsv", "dimoc_qc.json", "dimoc_report.html"};
    char *group = dm_path_join(out, "group");
    if (!group) return dm_set_error("out of memory");
    if (dm_mkdir_p(group)) {
        free(group);
        return -1;
    }
    char *tmp[N_OUT] = {0}, *final[N_OUT] = {0};
    int rc = 0;
    for (int k = 0; rc == 0 && k < N_OUT; k++) {
        final[k] = dm_path_join(group, names[k]);
        if (!final[k]) {
            rc = dm_set_error("out of memory");
            break;
        }
        /* A folder in the way would fail its rename after the others were done. */
        struct stat st;
        if (lstat(final[k], &st) == 0 && !S_ISREG(st.st_mode))
            rc = dm_set_error("cannot write %s: something other than a file is there", final[k]);
    }
    for (int k = 0; rc == 0 && k < N_OUT; k++) {
        if (!(tmp[k] = dm_temp_sibling(final[k]))) {
            rc = -1;
            break;
        }
        rc = write_one(t, k, tmp[k], final[k]);
    }
    if (rc == 0) {
        rc = dm_commit_files(tmp, final, N_OUT);
    } else {
        for (int k = 0; k < N_OUT; k++)
            if (tmp[k]) unlink(tmp[k]);
    }
    for (int k = 0; k < N_OUT; k++) {
        free(tmp[k]);
        free(final[k]);
    }
    free(group);
    return rc;
}

int dm_study_group(const char *output_dir, const dm_study_group_options *o)
{
    double z_limit = o && o->z_limit != 0 ? o->z_limit : DM_STUDY_Z_LIMIT_DEFAULT;
    const char *only = o ? o->pipeline : NULL;
    if (!(z_limit > 0) || isinf(z_limit))
        return dm_set_error("the z limit (--z-limit) must be a positive number (it is %g)",
                            z_limit);
    if (!is_dir(output_dir))
        return dm_set_error("%s: not a folder (the output folder of the participant level)",
                            output_dir);
    gathered g = {0};
    dm_qc_table t = {0};
    int rc = gather(&g, output_dir);
    int n_read = g.n_runs;
    if (rc == 0 && only) { /* keep the one pipeline's runs */
        int kept = 0;
        for (int i = 0; i < g.n_runs; i++) {
            if (!strcmp(g.run[i].pipeline, only))
                g.run[kept++] = g.run[i];
            else
                free_parsed(&g.run[i]);
        }
        g.n_runs = kept;
    }
    if (rc == 0 && g.n_found == 0)
        rc = dm_set_error("%s: no sub-*/[ses-*/]dwi/*_qc.json (run the participant level first)",
                          output_dir);
    else if (rc == 0 && n_read == 0)
        rc = dm_set_error("%s: none of its %d qc files could be read (listed above)", output_dir,
                          g.n_found);
    else if (rc == 0 && g.n_runs == 0)
        rc = dm_set_error("%s: no run of pipeline %s among its %d qc files", output_dir, only,
                          n_read);
    if (rc == 0) {
        t.z_limit = z_limit;
        t.output_dir = output_dir;
        t.skipped = g.skipped;
        t.n_skipped = g.n_skipped;
        g.skipped = NULL;
        g.n_skipped = 0;
        rc = build_table(&t, &g, output_dir);
    }
    if (rc == 0) rc = write_outputs(&t, output_dir);
    if (rc == 0 && t.n_skipped > 0)
        rc = dm_set_error("%d of the %d qc files under %s could not be read (listed above) and "
                          "are left out of group/dimoc_qc.tsv",
                          t.n_skipped, g.n_found, output_dir);
    for (int i = 0; i < g.n_runs; i++) free_parsed(&g.run[i]);
    free(g.run);
    free_strings(g.skipped, g.n_skipped);
    free_table(&t);
    return rc;
}
