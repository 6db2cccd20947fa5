/* `dimoc merge` of .tck files: streamlines part after part (merge_kinds.h). */
#include "cluster/merge_kinds.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/tck.h"
#include "cluster/part.h"
#include "util/cmdline.h"

#include <errno.h>
#include <math.h>
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

/* The header as io/tck.c writes it: fixed-width "count:" and "total_count:" fields, then
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
 * io/tck.c (the "file:" offset follows the header's length), with the counts filled in. */
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

/* The streamlines of part 1, then part 2, ...; the header's counts the sums of the parts'. */
int dm_merge_tck(dm_part_manifest *const parts[], int n, const char *name, const char *out,
                 const char *out_dir)
{
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
