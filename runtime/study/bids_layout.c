/* Finding a BIDS dataset's diffusion runs, their gradient files and sidecars (the inheritance
 * principle) and a mask in derivatives/ (see bids_layout.h). */
#define _GNU_SOURCE
#include "study/bids_layout.h"
#include "io/textio.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_ENTITIES = 16 };

/* The key-value entities of a BIDS name's stem ("sub-01_ses-1_acq-b1000_run-1"). */
typedef struct entities {
    char key[MAX_ENTITIES][32], value[MAX_ENTITIES][64];
    int n;
} entities;

static void parse_entities(const char *stem, entities *e)
{
    e->n = 0;
    const char *p = stem;
    while (*p && e->n < MAX_ENTITIES) {
        size_t len = strcspn(p, "_");
        const char *dash = memchr(p, '-', len);
        if (dash) {
            snprintf(e->key[e->n], sizeof e->key[0], "%.*s", (int)(dash - p), p);
            snprintf(e->value[e->n], sizeof e->value[0], "%.*s", (int)(len - (dash - p) - 1),
                     dash + 1);
            e->n++;
        }
        p += len;
        p += *p == '_';
    }
}

static const char *entity(const entities *e, const char *key)
{
    for (int i = 0; i < e->n; i++)
        if (!strcmp(e->key[i], key)) return e->value[i];
    return NULL;
}

/* Every entity of `sub` is the run's, with the same value (space and desc left out). */
static int entities_within(const entities *sub, const entities *run, int skip_space_desc)
{
    for (int i = 0; i < sub->n; i++) {
        if (skip_space_desc && (!strcmp(sub->key[i], "space") || !strcmp(sub->key[i], "desc")))
            continue;
        const char *v = entity(run, sub->key[i]);
        if (!v || strcmp(v, sub->value[i])) return 0;
    }
    return 1;
}

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && !strcmp(s + n - m, end);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a folder (sorted, malloc'd, NULL-ended); NULL when it cannot be read. */
static char **list_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    *count = 0;
    if (!d) return NULL;
    int cap = 16, n = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n + 1 >= cap) names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    names[n] = NULL;
    qsort(names, n, sizeof *names, cmp_str);
    *count = n;
    return names;
}

static void free_list(char **names)
{
    for (char **p = names; p && *p; p++) free(*p);
    free(names);
}

const char *dm_bids_label(const char *label, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(label, prefix, n) ? label : label + n;
}

char *dm_bids_unit_name(const dm_bids_unit *u)
{
    char *s = NULL;
    if (asprintf(&s, u->session ? "sub-%s ses-%s" : "sub-%s", u->subject, u->session) < 0)
        return NULL;
    return s;
}

char *dm_bids_unit_rel(const dm_bids_unit *u)
{
    char *s = NULL;
    if (asprintf(&s, u->session ? "sub-%s/ses-%s" : "sub-%s", u->subject, u->session) < 0)
        return NULL;
    return s;
}

static char *fault(const char *fmt, const char *a, const char *b)
{
    char *s = NULL;
    if (asprintf(&s, fmt, a, b) < 0) return NULL;
    return s;
}

/* The metadata file of a run by the inheritance principle: at each level from the deepest
 * (the dwi folder, the session's, the subject's, the dataset's top), the files named
 * [ENTITIES_]dwi.EXT whose entities are all the run's; the deepest level that has one gives
 * it.  Two at one level: an error (BIDS allows one).  NULL (none) or the path; *err set on the
 * error. */
static char *inherited(char *const levels[], int nlevels, const entities *run, const char *ext,
                       char **err)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "dwi%s", ext);
    for (int l = 0; l < nlevels; l++) {
        int n;
        char **names = list_dir(levels[l], &n);
        char *found = NULL;
        for (int i = 0; i < n && !*err; i++) {
            const char *name = names[i];
            size_t len = strlen(name), sl = strlen(suffix);
            if (len < sl || strcmp(name + len - sl, suffix)) continue;
            if (len > sl && name[len - sl - 1] != '_') continue;
            char stem[NAME_MAX + 1];
            snprintf(stem, sizeof stem, "%.*s", (int)(len > sl ? len - sl - 1 : 0), name);
            entities e;
            parse_entities(stem, &e);
            if (!entities_within(&e, run, 0)) continue;
            char *path = dm_path_join(levels[l], name);
            if (found) {
                *err = fault("%s: two files at one level of the inheritance apply to the run "
                             "(also %s)",
                             path, found);
                free(path);
                break;
            }
            found = path;
        }
        free_list(names);
        if (*err) {
            free(found);
            return NULL;
        }
        if (found) return found;
    }
    return NULL;
}

/* Every *_desc-brain_mask.nii[.gz] under derivatives/ (depth 6 at most, skip_dir left out). */
typedef struct mask_list {
    char **path;
    int n, cap;
} mask_list;

static void find_masks(const char *dir, const char *skip, int depth, mask_list *m)
{
    if (depth > 6 || (skip && !strcmp(dir, skip))) return;
    int n;
    char **names = list_dir(dir, &n);
    for (int i = 0; i < n; i++) {
        char *path = dm_path_join(dir, names[i]);
        if (is_dir(path)) {
            find_masks(path, skip, depth + 1, m);
            free(path);
        } else if (!strncmp(names[i], "sub-", 4) &&
                   (ends_with(names[i], "_desc-brain_mask.nii.gz") ||
                    ends_with(names[i], "_desc-brain_mask.nii"))) {
            if (m->n == m->cap)
                m->path = realloc(m->path, (m->cap = 2 * m->cap + 8) * sizeof *m->path);
            m->path[m->n++] = path;
        } else {
            free(path);
        }
    }
    free_list(names);
}

/* The dataset's mask of a run: entities (but space, desc) all the run's, space absent or
 * "dwi"; the one with most entities wins.  NULL: none. */
static char *mask_of(const mask_list *m, const entities *run)
{
    const char *best = NULL;
    int best_n = -1;
    for (int i = 0; i < m->n; i++) {
        const char *slash = strrchr(m->path[i], '/'), *name = slash ? slash + 1 : m->path[i];
        char stem[NAME_MAX + 1];
        snprintf(stem, sizeof stem, "%.*s", (int)(strstr(name, "_mask.nii") - name), name);
        entities e;
        parse_entities(stem, &e);
        const char *space = entity(&e, "space");
        if (space && strcmp(space, "dwi")) continue;
        if (!entities_within(&e, run, 1)) continue;
        if (e.n > best_n) best = m->path[i], best_n = e.n;
    }
    return best ? strdup(best) : NULL;
}

/* A sidecar that is present must be JSON. */
static char *check_json(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (j) {
        json_decref(j);
        return NULL;
    }
    char line[32];
    snprintf(line, sizeof line, "%d", je.line);
    char *s = NULL;
    if (asprintf(&s, "%s: not JSON (line %s: %s)", path, line, je.text) < 0) return NULL;
    return s;
}

/* The headers and gradient files of a run, checked: 4D, as many b-values and directions as
 * volumes, a mask on the DWI's grid. */
static char *check_run(dm_bids_run *r)
{
    dm_volume v;
    if (dm_volume_read_header(r->dwi, &v) != 0) return strdup(dm_last_error());
    r->nvol = v.nt;
    int nx = v.nx, ny = v.ny, nz = v.nz;
    dm_volume_free(&v);
    char *err = NULL;
    if (r->nvol < 2)
        return fault("%s: a 3D image (%s volume), not a 4D diffusion-weighted series", r->dwi,
                     "one");
    if (!r->bval) return fault("%s: no .bval file for it (nor one inherited)%s", r->dwi, "");
    if (!r->bvec) return fault("%s: no .bvec file for it (nor one inherited)%s", r->dwi, "");
    double *b = NULL, *g = NULL;
    int nread = 0;
    if (dm_read_bvals_bvecs(r->bval, r->bvec, r->nvol, &b, &g, &nread) != 0)
        err = strdup(dm_last_error());
    free(b);
    free(g);
    if (err) return err;
    if (r->json && (err = check_json(r->json)) != NULL) return err;
    if (r->mask) {
        if (dm_volume_read_header(r->mask, &v) != 0) return strdup(dm_last_error());
        int same = v.nx == nx && v.ny == ny && v.nz == nz;
        char shape[64];
        snprintf(shape, sizeof shape, "%dx%dx%d, the DWI %dx%dx%d", v.nx, v.ny, v.nz, nx, ny, nz);
        dm_volume_free(&v);
        if (!same) return fault("%s: a mask on another grid (%s)", r->mask, shape);
    }
    return NULL;
}

/* The runs of one unit's dwi folder. */
static void unit_runs(dm_bids_unit *u, const char *root, const char *sub_dir, const char *ses_dir,
                      const mask_list *masks)
{
    char *dwi_dir = dm_path_join(ses_dir ? ses_dir : sub_dir, "dwi");
    int n;
    char **names = list_dir(dwi_dir, &n);
    u->runs = calloc((size_t)n + 1, sizeof *u->runs);
    char *levels[4];
    int nlevels = 0;
    levels[nlevels++] = dwi_dir;
    if (ses_dir) levels[nlevels++] = (char *)ses_dir;
    levels[nlevels++] = (char *)sub_dir;
    levels[nlevels++] = (char *)root;
    for (int i = 0; i < n; i++) {
        const char *name = names[i];
        const char *end = ends_with(name, "_dwi.nii.gz") ? "_dwi.nii.gz"
                          : ends_with(name, "_dwi.nii")  ? "_dwi.nii"
                                                         : NULL;
        if (!end) continue;
        size_t stem_len = strlen(name) - strlen(end);
        char *prefix = strndup(name, stem_len);
        char *path = dm_path_join(dwi_dir, name);
        /* Two runs of one name: X_dwi.nii and X_dwi.nii.gz. */
        dm_bids_run *same = NULL;
        for (int k = 0; k < u->nruns; k++)
            if (!strcmp(u->runs[k].prefix, prefix)) same = &u->runs[k];
        if (same) {
            if (!same->error)
                same->error =
                    fault("%s: two runs of one name (also %s); remove one", path, same->dwi);
            free(prefix);
            free(path);
            continue;
        }
        dm_bids_run *r = &u->runs[u->nruns++];
        r->prefix = prefix;
        r->dwi = path;
        entities e;
        parse_entities(prefix, &e);
        char *err = NULL;
        r->bval = inherited(levels, nlevels, &e, ".bval", &err);
        if (!err) r->bvec = inherited(levels, nlevels, &e, ".bvec", &err);
        if (!err) r->json = inherited(levels, nlevels, &e, ".json", &err);
        if (!err) r->mask = mask_of(masks, &e);
        if (!err) err = check_run(r);
        r->error = err;
    }
    free_list(names);
    free(dwi_dir);
    if (u->nruns == 0)
        u->error =
            fault("%s: no dwi data (no %s_dwi.nii[.gz] in it)", ses_dir ? ses_dir : sub_dir, "*");
}

static int wanted(const char *label, const char *const *list, int n, const char *prefix)
{
    if (n == 0) return 1;
    for (int i = 0; i < n; i++)
        if (!strcmp(dm_bids_label(list[i], prefix), label)) return 1;
    return 0;
}

static dm_bids_unit *add_unit(dm_bids_layout *L, int *cap, const char *sub, const char *ses)
{
    if (L->nunits == *cap) L->units = realloc(L->units, (*cap = 2 * *cap + 8) * sizeof *L->units);
    dm_bids_unit *u = &L->units[L->nunits++];
    memset(u, 0, sizeof *u);
    u->subject = strdup(sub);
    u->session = ses ? strdup(ses) : NULL;
    return u;
}

int dm_bids_discover(const char *bids_dir, const char *const *subjects, int nsubjects,
                     const char *const *sessions, int nsessions, const char *skip_dir,
                     dm_bids_layout *L)
{
    memset(L, 0, sizeof *L);
    L->root = realpath(bids_dir, NULL);
    if (!L->root || !is_dir(L->root)) {
        dm_set_error("%s: %s", bids_dir, L->root ? "not a folder" : strerror(errno));
        free(L->root);
        L->root = NULL;
        return -1;
    }
    char *desc = dm_path_join(L->root, "dataset_description.json");
    json_error_t je;
    json_t *j = json_load_file(desc, 0, &je);
    int rc = 0;
    if (!j && access(desc, F_OK) != 0)
        rc = dm_set_error("%s: missing: %s is no BIDS dataset", desc, bids_dir);
    else if (!j)
        rc = dm_set_error("%s: not JSON (line %d: %s)", desc, je.line, je.text);
    else if (!json_is_object(j))
        rc = dm_set_error("%s: not a JSON object", desc);
    json_decref(j);
    free(desc);
    if (rc != 0) {
        dm_bids_layout_free(L);
        return -1;
    }

    mask_list masks = {0};
    char *deriv = dm_path_join(L->root, "derivatives");
    char *skip = skip_dir ? realpath(skip_dir, NULL) : NULL;
    if (is_dir(deriv)) find_masks(deriv, skip, 0, &masks);
    free(skip);
    free(deriv);

    int n, cap = 0;
    char **names = list_dir(L->root, &n);
    for (int i = 0; i < n; i++) {
        const char *sub = names[i];
        char *sub_dir = dm_path_join(L->root, sub);
        if (strncmp(sub, "sub-", 4) || !is_dir(sub_dir) ||
            !wanted(sub + 4, subjects, nsubjects, "sub-")) {
            free(sub_dir);
            continue;
        }
        int ns;
        char **ses = list_dir(sub_dir, &ns);
        int has_sessions = 0, units_before = L->nunits;
        for (int k = 0; k < ns; k++) {
            char *ses_dir = dm_path_join(sub_dir, ses[k]);
            if (!strncmp(ses[k], "ses-", 4) && is_dir(ses_dir)) {
                has_sessions = 1;
                if (wanted(ses[k] + 4, sessions, nsessions, "ses-")) {
                    dm_bids_unit *u = add_unit(L, &cap, sub + 4, ses[k] + 4);
                    unit_runs(u, L->root, sub_dir, ses_dir, &masks);
                }
            }
            free(ses_dir);
        }
        free_list(ses);
        if (!has_sessions && nsessions == 0) {
            dm_bids_unit *u = add_unit(L, &cap, sub + 4, NULL);
            unit_runs(u, L->root, sub_dir, NULL, &masks);
        }
        /* A subject asked for by name that has none of the sessions asked for. */
        if (L->nunits == units_before && nsubjects > 0) {
            dm_bids_unit *u = add_unit(L, &cap, sub + 4, NULL);
            u->error = fault("%s: no dwi data in the sessions asked for%s", sub_dir, "");
        }
        free(sub_dir);
    }
    free_list(names);
    /* Subjects asked for that the dataset lacks. */
    for (int i = 0; i < nsubjects; i++) {
        const char *label = dm_bids_label(subjects[i], "sub-");
        int found = 0;
        for (int k = 0; k < L->nunits && !found; k++) found = !strcmp(L->units[k].subject, label);
        if (found) continue;
        dm_bids_unit *u = add_unit(L, &cap, label, NULL);
        char *path = NULL;
        if (asprintf(&path, "%s/sub-%s", L->root, label) < 0) path = NULL;
        u->error = fault("%s: no such participant folder: no dwi data%s", path ? path : label, "");
        free(path);
    }
    for (int i = 0; i < masks.n; i++) free(masks.path[i]);
    free(masks.path);
    return 0;
}

void dm_bids_layout_free(dm_bids_layout *L)
{
    for (int i = 0; i < L->nunits; i++) {
        dm_bids_unit *u = &L->units[i];
        for (int k = 0; k < u->nruns; k++) {
            dm_bids_run *r = &u->runs[k];
            free(r->prefix), free(r->dwi), free(r->bval), free(r->bvec), free(r->json);
            free(r->mask), free(r->error);
        }
        free(u->runs), free(u->subject), free(u->session), free(u->error);
    }
    free(L->units);
    free(L->root);
    memset(L, 0, sizeof *L);
}
