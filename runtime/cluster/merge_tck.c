/* `dimoc merge` of tractograms: streamlines part after part (merge_kinds.h); .tck files by their
 * bytes, TRX and .trk files read and written again through tractogram/tractogram.h. */
#include "cluster/merge_kinds.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/formats.h"
#include "tractogram/tck.h"
#include "tractogram/tractogram.h"
#include "tractogram/trk.h"
#include "cluster/part.h"
#include "util/cmdline.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tck_part {
    FILE *f;
    long offset;    /* where the points start */
    long long body; /* bytes of points before the final Inf triplet */
    unsigned long long count, total;
    char *header; /* the header with its counts blanked, to compare parts by */
} tck_part;

/* The header as tractogram/tck.c writes it: fixed-width "count:" and "total_count:" fields, then
 * "file: . OFFSET", "END"; the points, and one Inf triplet at the end. */
static int tck_open(const dm_part_manifest *m, const char *name, tck_part *t)
{
    memset(t, 0, sizeof *t);
    char *path = dm_path_join(m->dir, name);
    int rc = 0;
    t->f = fopen(path, "rb");
    char head[65536];
    size_t got = t->f ? fread(head, 1, sizeof head - 1, t->f) : 0;
    head[got] = 0;
    char *cnt = strstr(head, "\ncount: "), *tot = strstr(head, "\ntotal_count: ");
    char *file = strstr(head, "\nfile: . ");
    if (!t->f) {
        rc = dm_set_error("%s: cannot open: %s", path, strerror(errno));
    } else if (strncmp(head, "mrtrix tracks\n", 14) || !cnt || !tot || !file ||
               !strstr(head, "\nEND\n")) {
        rc = dm_set_error("%s: not a .tck file written by dimoc", path);
    } else {
        t->count = strtoull(cnt + 8, NULL, 10);
        t->total = strtoull(tot + 14, NULL, 10);
        t->offset = strtol(file + 9, NULL, 10);
        memset(cnt + 8, '#', 12);
        memset(tot + 14, '#', 12);
        t->header = strndup(head, (size_t)t->offset);
        float inf[3];
        if (fseek(t->f, -12, SEEK_END) != 0 || fread(inf, 4, 3, t->f) != 3 || !isinf(inf[0]))
            rc = dm_set_error("%s: does not end with the Inf triplet: unfinished", path);
        else
            t->body = ftell(t->f) - 12 - t->offset;
        if (rc == 0 && (t->offset <= 0 || (size_t)t->offset > got || t->body < 0))
            rc = dm_set_error("%s: not a .tck file written by dimoc", path);
    }
    free(path);
    return rc;
}

static int copy_span(FILE *from, long at, long long len, FILE *to)
{
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    int rc = buf && fseek(from, at, SEEK_SET) == 0 ? 0 : -1;
    while (rc == 0 && len > 0) {
        size_t want = len < CHUNK ? (size_t)len : CHUNK;
        if (fread(buf, 1, want, from) != want || fwrite(buf, 1, want, to) != want) rc = -1;
        len -= (long long)want;
    }
    free(buf);
    return rc;
}

/* `text` with every `mark` replaced by `by` (malloc'd). */
static char *replace_all(const char *text, const char *mark, const char *by)
{
    size_t n = 0, lm = strlen(mark), lb = strlen(by);
    for (const char *p = strstr(text, mark); p; p = strstr(p + lm, mark)) n++;
    char *s = malloc(strlen(text) + n * lb + 1), *o = s;
    for (const char *p = text;;) {
        const char *hit = strstr(p, mark);
        size_t k = hit ? (size_t)(hit - p) : strlen(p);
        memcpy(o, p, k);
        o += k;
        if (!hit) break;
        memcpy(o, by, lb);
        o += lb;
        p = hit + lm;
    }
    *o = 0;
    return s;
}

/* The header one run with --out `out` writes: the parts' lines with dm_part_history's marks
 * replaced by `out` (as the shell quoting of the command line writes it), laid out again by
 * tractogram/tck.c (the "file:" offset follows the header's length), with the counts filled in. */
static char *merged_tck_header(const char *part_header, const char *out, unsigned long long count,
                               unsigned long long total, size_t *len)
{
    const char *info = strstr(part_header, "\ndatatype: ");
    info = info ? strchr(info + 1, '\n') + 1 : part_header;
    const char *cnt = strstr(info - 1, "\ncount: ");
    char *lines = strndup(info, cnt ? (size_t)(cnt + 1 - info) : 0);
    char *eq = malloc(strlen(out) + 8);
    sprintf(eq, "--out=%s", out);
    char *words[2] = {(char *)out, eq};
    char *q_out = dm_shell_quote_argv(1, &words[0]), *q_eq = dm_shell_quote_argv(1, &words[1]);
    char *a = replace_all(lines, DM_PART_OUT_MARK, q_out);
    char *b = replace_all(a, DM_PART_OUT_EQ_MARK, q_eq);
    long count_at;
    char *head = dm_tck_header(b, len, &count_at);
    if (head) {
        char num[64];
        int n = snprintf(num, sizeof num, "%012llu\ntotal_count: %012llu", count, total);
        memcpy(head + count_at, num, (size_t)n);
    }
    free(lines);
    free(eq);
    free(q_out);
    free(q_eq);
    free(a);
    free(b);
    return head;
}

/* A part's header lines without count and total_count (what the parts of one run share), and
 * its total_count (0 when it has none). */
static char *shared_lines(const char *props, unsigned long long *total)
{
    char *s = malloc(strlen(props ? props : "") + 1), *o = s;
    *total = 0;
    for (const char *line = props ? props : ""; s && *line;) {
        size_t n = strcspn(line, "\n");
        if (!strncmp(line, "total_count:", 12))
            *total = strtoull(line + 12, NULL, 10);
        else if (strncmp(line, "count:", 6)) {
            memcpy(o, line, n);
            o += n;
            *o++ = '\n';
        }
        line += n + (line[n] == '\n');
    }
    if (s) *o = 0;
    return s;
}

static int same_grid(const dm_tract_grid *a, const dm_tract_grid *b)
{
    return a->valid == b->valid && !memcmp(a->dims, b->dims, sizeof a->dims) &&
           !memcmp(a->vox2ras, b->vox2ras, sizeof a->vox2ras);
}

/* TRX and .trk parts: each read whole (tractogram/tractogram.h), its streamlines and per-streamline
 * values appended; the header lines must be those of part 1 (the counts aside), the grid too.
 * The values are known before the first streamline is written (a .trk writes them with it):
 * where part 1 has any, the parts are read twice, first for the values. */
static int merge_read_again(dm_part_manifest *const parts[], int n, const char *name,
                            const char *out, const char *out_dir)
{
    dm_tck first;
    char *path = dm_path_join(parts[0]->dir, name);
    if (!path || dm_tractogram_read(path, &first, 0) != 0) {
        free(path);
        return -1;
    }
    free(path);
    unsigned long long total = 0, t0;
    char *lines = shared_lines(first.properties, &t0);
    int rc = lines ? 0 : dm_set_error("out of memory");
    const int ndps = first.ndps;
    float **values = calloc((size_t)(ndps ? ndps : 1), sizeof *values);
    long nvalues = 0;
    /* pass 1 (only with values): checks, counts, values */
    const int raw = dm_tracts_format_of(name) == DM_TRACTS_TRK; /* values copied with the records */
    for (int k = 0; rc == 0 && ndps && !raw && k < n; k++) {
        dm_tck t;
        char *p = dm_path_join(parts[k]->dir, name);
        rc = p ? dm_tractogram_read(p, &t, 0) : -1;
        for (int v = 0; rc == 0 && v < ndps; v++) {
            const dm_tract_values *x = dm_tck_dps(&t, first.dps[v].name);
            if (!x || x->ncols != 1 || t.ndps != ndps)
                rc = dm_set_error("%s: its per-streamline values differ from part 1's: not parts "
                                  "of one run",
                                  p);
            float *grown = rc == 0
                               ? realloc(values[v], (size_t)(nvalues + t.count + 1) * sizeof *grown)
                               : NULL;
            if (rc == 0 && !grown) rc = dm_set_error("out of memory");
            if (rc == 0) {
                values[v] = grown;
                memcpy(grown + nvalues, x->values, (size_t)t.count * sizeof *grown);
            }
        }
        if (rc == 0) nvalues += t.count;
        if (rc == 0 || p) dm_tck_free(&t);
        free(p);
    }
    char *eq = malloc(strlen(out_dir) + 8);
    sprintf(eq, "--out=%s", out_dir);
    char *words[2] = {(char *)out_dir, eq};
    char *q_out = dm_shell_quote_argv(1, &words[0]), *q_eq = dm_shell_quote_argv(1, &words[1]);
    char *a = lines ? replace_all(lines, DM_PART_OUT_MARK, q_out) : NULL;
    char *info = a ? replace_all(a, DM_PART_OUT_EQ_MARK, q_eq) : NULL;
    /* a .trk: its records copied as they are, after the checks (no rounding twice) */
    const int trk = dm_tracts_format_of(name) == DM_TRACTS_TRK;
    char **paths = trk ? calloc((size_t)n, sizeof *paths) : NULL;
    dm_tractogram_writer *w =
        rc == 0 && info && !trk ? dm_tractogram_open(out, info, &first.grid) : NULL;
    if (rc == 0 && ((!trk && !w) || (trk && !paths))) rc = -1;
    for (int v = 0; rc == 0 && w && v < ndps; v++)
        rc = dm_tractogram_set_dps(w, first.dps[v].name, values[v], nvalues);
    /* pass 2: the streamlines */
    for (int k = 0; rc == 0 && k < n; k++) {
        dm_tck t;
        char *p = dm_path_join(parts[k]->dir, name);
        rc = p ? dm_tractogram_read(p, &t, 0) : -1;
        unsigned long long tk = 0;
        char *mine = rc == 0 ? shared_lines(t.properties, &tk) : NULL;
        if (rc == 0 && (!mine || strcmp(mine, lines) || !same_grid(&t.grid, &first.grid)))
            rc = dm_set_error("%s: its header differs from part 1's: not parts of one run", p);
        total += tk;
        size_t *start = rc == 0 ? malloc((size_t)(t.count + 1) * sizeof *start) : NULL;
        int *npts = rc == 0 ? malloc((size_t)(t.count + 1) * sizeof *npts) : NULL;
        if (rc == 0 && (!start || !npts)) rc = dm_set_error("out of memory");
        for (long i = 0; rc == 0 && i < t.count; i++) {
            start[i] = (size_t)t.start[i];
            npts[i] = (int)t.npoints[i];
        }
        if (rc == 0 && trk) paths[k] = strdup(p);
        if (rc == 0 && !trk)
            rc = dm_tractogram_add_many(w, t.xyz, start, npts, t.count, omp_get_max_threads());
        free(start);
        free(npts);
        free(mine);
        if (p) dm_tck_free(&t);
        free(p);
    }
    if (w) {
        if (rc == 0)
            rc = dm_tractogram_close(w, total);
        else
            dm_tractogram_abort(w);
    }
    if (trk && rc == 0) rc = dm_trk_concat(paths, n, out, info, total);
    for (int k = 0; paths && k < n; k++) free(paths[k]);
    free(paths);
    for (int v = 0; v < ndps; v++) free(values[v]);
    free(values);
    free(lines);
    free(eq);
    free(q_out);
    free(q_eq);
    free(a);
    free(info);
    dm_tck_free(&first);
    return rc;
}

/* The streamlines of part 1, then part 2, ...; the header's counts the sums of the parts'. */
int dm_merge_tck(dm_part_manifest *const parts[], int n, const char *name, const char *out,
                 const char *out_dir)
{
    if (dm_tracts_format_of(name) == DM_TRACTS_TRX || dm_tracts_format_of(name) == DM_TRACTS_TRK)
        return merge_read_again(parts, n, name, out, out_dir);
    tck_part *t = calloc((size_t)n, sizeof *t);
    unsigned long long count = 0, total = 0;
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        rc = tck_open(parts[k], name, &t[k]);
        if (rc == 0 && k > 0 && strcmp(t[k].header, t[0].header))
            rc = dm_set_error("%s/%s: its header differs from part 1's: not parts of one run",
                              parts[k]->dir, name);
        count += t[k].count;
        total += t[k].total;
    }
    size_t hlen = 0;
    char *head = rc == 0 ? merged_tck_header(t[0].header, out_dir, count, total, &hlen) : NULL;
    if (rc == 0 && !head) rc = -1;
    FILE *f = rc == 0 ? fopen(out, "wb") : NULL;
    if (rc == 0 && !f) rc = dm_set_error("cannot write %s: %s", out, strerror(errno));
    if (f) {
        if (fwrite(head, 1, hlen, f) != hlen) rc = -1;
        for (int k = 0; k < n && rc == 0; k++) rc = copy_span(t[k].f, t[k].offset, t[k].body, f);
        const float inf[3] = {INFINITY, INFINITY, INFINITY};
        if (rc == 0 && fwrite(inf, 4, 3, f) != 3) rc = -1;
        if ((fclose(f) != 0 || rc != 0) && rc == 0) rc = -1;
        if (rc != 0) rc = dm_set_error("cannot write %s: disk full?", out);
    }
    free(head);
    for (int k = 0; k < n; k++) {
        if (t[k].f) fclose(t[k].f);
        free(t[k].header);
    }
    free(t);
    return rc;
}
