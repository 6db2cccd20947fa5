/* --part K/N: the share of a job and the manifest that `dimoc merge` reads (part.h). */
#include "cluster/part.h"
#include "io/formats.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int dm_part_parse(const char *text, dm_part *p)
{
    p->k = p->n = 0;
    if (!text || !*text) return 0;
    char *end;
    errno = 0;
    long k = strtol(text, &end, 10);
    if (end == text || *end != '/')
        return dm_set_error("--part: '%s' is not K/N (the K-th of N parts, K from 1)", text);
    const char *ns = end + 1;
    long n = strtol(ns, &end, 10);
    if (end == ns || *end || errno)
        return dm_set_error("--part: '%s' is not K/N (the K-th of N parts, K from 1)", text);
    if (n < 1 || n > 1000000 || k < 1 || k > n)
        return dm_set_error("--part: '%s' needs 1 <= K <= N (N at most 1000000)", text);
    if (dm_image_format_chosen() != DM_IMAGE_NII_GZ)
        return dm_set_error("--part: a part's maps are .nii.gz, which `dimoc merge` joins by "
                            "their bytes; leave --format's image format out (mrconvert turns "
                            "the merged maps into .mif)");
    p->k = (int)k;
    p->n = (int)n;
    return 0;
}

void dm_part_range(const dm_part *p, size_t total, size_t *first, size_t *end)
{
    if (p->n <= 0) {
        *first = 0;
        *end = total;
        return;
    }
    /* floor(total * k / n) without overflow for any total a computer holds */
    unsigned __int128 t = total;
    *first = (size_t)(t * (unsigned)(p->k - 1) / (unsigned)p->n);
    *end = (size_t)(t * (unsigned)p->k / (unsigned)p->n);
}

void dm_part_select_voxels(const dm_part *p, size_t *index, size_t *count, size_t nvox,
                           size_t *own_first, size_t *own_end)
{
    size_t first, end, n = *count;
    dm_part_range(p, n, &first, &end);
    *own_first = p->k <= 1 ? 0 : first < n ? index[first] : nvox;
    *own_end = p->k == p->n ? nvox : end < n ? index[end] : nvox;
    memmove(index, index + first, (end - first) * sizeof *index);
    *count = end - first;
}

static const char *const merge_names[] = {NULL,     "voxels", "sum", "same", "tck",      "lines",
                                          "concat", "counts", "dot", "mean", "part-only"};
enum { NMERGE = sizeof merge_names / sizeof *merge_names };

const char *dm_part_merge_name(int how)
{
    return how > 0 && how < NMERGE ? merge_names[how] : "?";
}

int dm_part_merge_kind(const char *name)
{
    for (int i = 1; i < NMERGE; i++)
        if (!strcmp(merge_names[i], name)) return i;
    return 0;
}

/* The value of --out on the command line (NULL when none). */
static const char *out_value(int argc, char **argv)
{
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strncmp(argv[i], "--out=", 6))
            out = argv[i] + 6;
    }
    return out;
}

char *dm_part_command(void)
{
    int argc;
    char **argv = dm_command_argv(&argc);
    char **kept = malloc(((size_t)argc + 1) * sizeof *kept);
    char **made = calloc((size_t)argc + 1, sizeof *made);
    const char *out = out_value(argc, argv);
    size_t lo = out ? strlen(out) : 0;
    while (lo > 1 && out[lo - 1] == '/') lo--;
    int n = 0, nmade = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--part") || !strcmp(a, "--out")) {
            i++; /* and its value */
            continue;
        }
        if (!strncmp(a, "--part=", 7) || !strncmp(a, "--out=", 6)) continue;
        if (out && !strncmp(a, out, lo) && a[lo] == '/') {
            /* a file inside --out (track --save-streamlines OUT/x.tck): the same in every part */
            char *w = malloc(strlen(a) + 8);
            sprintf(w, "{out}%s", a + lo);
            kept[n++] = made[nmade++] = w;
            continue;
        }
        kept[n++] = argv[i];
    }
    char *s = dm_shell_quote_argv(n, kept);
    for (int i = 0; i < nmade; i++) free(made[i]);
    free(made);
    free(kept);
    return s;
}

char *dm_part_history(const dm_part *p)
{
    int argc;
    char **argv = dm_command_argv(&argc);
    if (p->n <= 0) return dm_shell_quote_argv(argc, argv);
    char **kept = malloc(((size_t)argc + 1) * sizeof *kept);
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i > 0 && !strcmp(a, "--part")) {
            i++;
            continue;
        }
        if (i > 0 && !strncmp(a, "--part=", 7)) continue;
        if (i > 0 && !strcmp(a, "--out") && i + 1 < argc) {
            kept[n++] = argv[i];
            kept[n++] = DM_PART_OUT_MARK;
            i++;
            continue;
        }
        kept[n++] = i > 0 && !strncmp(a, "--out=", 6) ? DM_PART_OUT_EQ_MARK : argv[i];
    }
    char *s = dm_shell_quote_argv(n, kept);
    free(kept);
    return s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The folder's file names but provenance.json, sorted (the manifest lists them in this order). */
static char **list_files(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        dm_set_error("%s: cannot list the folder: %s", dir, strerror(errno));
        return NULL;
    }
    int n = 0, cap = 16;
    char **names = malloc((size_t)cap * sizeof *names);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!strcmp(e->d_name, "provenance.json") || !strcmp(e->d_name, "part.json")) continue;
        if (n == cap) names = realloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    return names;
}

int dm_part_write(const char *dir, const dm_part *p, const dm_part_info *info,
                  const dm_part_rule *rules, int nrules)
{
    if (p->n <= 0) return 0;
    int n;
    char **names = list_files(dir, &n);
    if (!names) return -1;
    int *how = calloc((size_t)n + 1, sizeof *how), rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char *path = dm_path_join(dir, names[i]);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            rc = dm_set_error("%s: not a file; a part's outputs are files", path);
        for (int r = 0; r < nrules && rc == 0 && !how[i]; r++)
            if (fnmatch(rules[r].pattern, names[i], 0) == 0) how[i] = rules[r].how;
        if (rc == 0 && !how[i])
            rc = dm_set_error("%s: no merge rule for this output (internal)", path);
        free(path);
    }
    char *path = dm_path_join(dir, "part.json");
    FILE *f = rc == 0 ? fopen(path, "w") : NULL;
    if (rc == 0 && !f) rc = dm_set_error("%s: cannot write: %s", path, strerror(errno));
    if (f) {
        dm_json j;
        dm_json_begin(&j, f);
        dm_json_int(&j, "dimoc_part", 1);
        dm_json_int(&j, "part", p->k);
        dm_json_int(&j, "parts", p->n);
        dm_json_str(&j, "command", info->command);
        dm_json_int(&j, "nvox", (long long)info->nvox);
        dm_json_int(&j, "voxel_first", (long long)info->voxel_first);
        dm_json_int(&j, "voxel_end", (long long)info->voxel_end);
        dm_json_key_object(&j, "files");
        for (int i = 0; i < n; i++) dm_json_str(&j, names[i], dm_part_merge_name(how[i]));
        dm_json_close(&j);
        dm_json_end(&j);
        if (ferror(f) | fclose(f)) rc = dm_set_error("%s: write failed", path);
    }
    free(path);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(how);
    return rc;
}
