/* dimoc merge: the part folders checked against each other, then each file joined by the
 * rule its manifest names (cluster/part.h): NIfTI voxels from their owning part, NIfTI sums,
 * identical files, .tck files, text lines and bytes one part after another, texts of counts
 * summed number by number, sparse matrices summed per entry, means from the parts' sums. */
#include "cluster/merge.h"
#include "cluster/part_manifest.h"
#include "io/tck.h"
#include "io/volume.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/json.h"
#include "util/outdir.h"
#include "cluster/part.h"
#include "util/progress.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- NIfTI ---- */

static int read_part_image(const dm_part_manifest *m, const char *name, dm_volume_bytes *b,
                           const dm_volume_bytes *like)
{
    char *path = dm_path_join(m->dir, name);
    int rc = dm_volume_bytes_read(path, b);
    if (rc == 0 && like &&
        (b->header_len != like->header_len || memcmp(b->header, like->header, b->header_len)))
        rc = dm_set_error("%s: its header differs from part 1's: not parts of one run", path);
    if (rc == 0 && m->nvox && b->nvox != m->nvox)
        rc = dm_set_error("%s: %zu voxels, but the part's manifest says %zu", path, b->nvox,
                          m->nvox);
    if (rc != 0 && b->values) dm_volume_bytes_free(b);
    free(path);
    return rc;
}

/* Each voxel from the part that owns it (every volume of a 4D image). */
static int merge_voxels(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    dm_volume_bytes base, b;
    if (read_part_image(parts[0], name, &base, NULL) != 0) return -1;
    int rc = 0;
    for (int k = 1; k < n && rc == 0; k++) {
        if ((rc = read_part_image(parts[k], name, &b, &base)) != 0) break;
        size_t bp = (size_t)b.bytes_per, first = parts[k]->voxel_first;
        size_t len = (parts[k]->voxel_end - first) * bp;
        for (size_t t = 0; t < b.nt; t++) {
            size_t at = (t * b.nvox + first) * bp;
            memcpy(base.values + at, b.values + at, len);
        }
        dm_volume_bytes_free(&b);
    }
    if (rc == 0) rc = dm_volume_bytes_write(out, &base);
    dm_volume_bytes_free(&base);
    return rc;
}

static double value_at(const dm_volume_bytes *b, size_t i)
{
    const unsigned char *p = b->values + i * (size_t)b->bytes_per;
    switch (b->datatype) {
    case 2: return *p;                                   /* DT_UINT8 */
    case 4: return *(const int16_t *)(const void *)p;    /* DT_INT16 */
    case 8: return *(const int32_t *)(const void *)p;    /* DT_INT32 */
    case 16: return *(const float *)(const void *)p;     /* DT_FLOAT32 */
    case 64: return *(const double *)(const void *)p;    /* DT_FLOAT64 */
    case 768: return *(const uint32_t *)(const void *)p; /* DT_UINT32 */
    default: return NAN;
    }
}

static void store_at(dm_volume_bytes *b, size_t i, double v)
{
    unsigned char *p = b->values + i * (size_t)b->bytes_per;
    switch (b->datatype) {
    case 2: *p = (unsigned char)lrint(v); break;
    case 4: *(int16_t *)(void *)p = (int16_t)lrint(v); break;
    case 8: *(int32_t *)(void *)p = (int32_t)lrint(v); break;
    case 16: *(float *)(void *)p = (float)v; break;
    case 64: *(double *)(void *)p = v; break;
    case 768: *(uint32_t *)(void *)p = (uint32_t)llrint(v); break;
    }
}

/* Voxel by voxel, the parts' values added in the order of K (in double, stored as the file's
 * type: counts stay exact). */
static int merge_sum(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    dm_volume_bytes base, b;
    if (read_part_image(parts[0], name, &base, NULL) != 0) return -1;
    size_t total = base.nvox * base.nt;
    int rc = 0;
    if (base.swapped || isnan(value_at(&base, 0)))
        rc = dm_set_error("%s/%s: summing needs a native-order image of a plain numeric type",
                          parts[0]->dir, name);
    double *sum = rc == 0 ? malloc(total * sizeof *sum) : NULL;
    if (sum) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < total; i++) sum[i] = value_at(&base, i);
    }
    for (int k = 1; k < n && rc == 0; k++) {
        if ((rc = read_part_image(parts[k], name, &b, &base)) != 0) break;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < total; i++) sum[i] += value_at(&b, i);
        dm_volume_bytes_free(&b);
    }
    if (rc == 0) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < total; i++) store_at(&base, i, sum[i]);
    }
    if (rc == 0) rc = dm_volume_bytes_write(out, &base);
    free(sum);
    dm_volume_bytes_free(&base);
    return rc;
}

/* ---- other files ---- */

static int write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    int bad = len && fwrite(data, 1, len, f) != len;
    if ((fclose(f) != 0) | bad) return dm_set_error("cannot write %s: disk full?", path);
    return 0;
}

static char *read_part_file(const dm_part_manifest *m, const char *name, size_t *len)
{
    char *path = dm_path_join(m->dir, name);
    char *text = dm_read_file(path, len);
    free(path);
    return text;
}

/* A file every part computed from the whole input: the same bytes in all. */
static int merge_same(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    size_t len0, len;
    char *first = read_part_file(parts[0], name, &len0);
    int rc = first ? 0 : -1;
    for (int k = 1; k < n && rc == 0; k++) {
        char *other = read_part_file(parts[k], name, &len);
        if (!other)
            rc = -1;
        else if (len != len0 || memcmp(first, other, len))
            rc = dm_set_error("%s/%s differs from part 1's: not parts of one run", parts[k]->dir,
                              name);
        free(other);
    }
    if (rc == 0) rc = write_bytes(out, first, len0);
    free(first);
    return rc;
}

/* Text lines of part 1, then part 2, ... */
static int merge_lines(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    FILE *f = fopen(out, "wb");
    if (!f) return dm_set_error("cannot write %s: %s", out, strerror(errno));
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = read_part_file(parts[k], name, &len);
        if (!text) {
            rc = -1;
            break;
        }
        if (len && fwrite(text, 1, len, f) != len) rc = dm_set_error("cannot write %s", out);
        if (rc == 0 && len && text[len - 1] != '\n' && k < n - 1) fputc('\n', f);
        free(text);
    }
    if (fclose(f) != 0 && rc == 0) rc = dm_set_error("cannot write %s: disk full?", out);
    return rc;
}

/* The bytes of part 1, then part 2, ... (streamed: a dictionary may be gigabytes). */
static int merge_concat(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    FILE *f = fopen(out, "wb");
    if (!f) return dm_set_error("cannot write %s: %s", out, strerror(errno));
    static _Thread_local char buf[1 << 20];
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        char *path = dm_path_join(parts[k]->dir, name);
        FILE *in = fopen(path, "rb");
        size_t got;
        if (!in) rc = dm_set_error("%s: cannot open: %s", path, strerror(errno));
        while (in && (got = fread(buf, 1, sizeof buf, in)) > 0 && rc == 0)
            if (fwrite(buf, 1, got, f) != got)
                rc = dm_set_error("cannot write %s: disk full?", out);
        if (in && ferror(in) && rc == 0) rc = dm_set_error("%s: read error", path);
        if (in) fclose(in);
        free(path);
    }
    if (fclose(f) != 0 && rc == 0) rc = dm_set_error("cannot write %s: disk full?", out);
    return rc;
}

/* ---- .tck ---- */

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
static int merge_tck(dm_part_manifest *const parts[], int n, const char *name, const char *out,
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

/* ---- text of whole numbers ---- */

/* The next piece of `p`: a run of digits (*is_num 1; no leading 0 but "0" itself, as printf's
 * %u writes them) or a run of separators (' ', '\t', '\n', ','). */
static const char *next_piece(const char *p, int *is_num, int *bad)
{
    const char *q = p;
    *is_num = *p >= '0' && *p <= '9';
    if (*is_num) {
        while (*q >= '0' && *q <= '9') q++;
        if (*p == '0' && q - p > 1) *bad = 1;
    } else {
        while (*q && strchr(" \t\n,", *q)) q++;
        if (q == p) *bad = 1; /* anything else */
    }
    return q;
}

/* Number by number, the parts' values added; the text between them as in part 1, which every
 * part must share (a text of counts laid out the same: waytotal, fdt_network_matrix,
 * connectome.csv). */
static int merge_counts(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    char **text = calloc((size_t)n, sizeof *text);
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        text[k] = read_part_file(parts[k], name, &len);
        if (!text[k])
            rc = -1;
        else if (strlen(text[k]) != len)
            rc = dm_set_error("%s/%s: not a text of whole numbers", parts[k]->dir, name);
    }
    FILE *f = rc == 0 ? fopen(out, "wb") : NULL;
    if (rc == 0 && !f) rc = dm_set_error("cannot write %s: %s", out, strerror(errno));
    const char **at = calloc((size_t)n, sizeof *at);
    for (int k = 0; k < n && rc == 0; k++) at[k] = text[k];
    while (rc == 0 && *at[0]) {
        int num = 0, bad = 0, num_k;
        const char *start0 = at[0], *end0 = next_piece(start0, &num, &bad);
        size_t len0 = (size_t)(end0 - start0);
        unsigned long long sum = 0;
        for (int k = 0; k < n && !bad; k++) {
            const char *end = *at[k] ? next_piece(at[k], &num_k, &bad) : at[k];
            if (!*at[k] || num_k != num ||
                (!num && ((size_t)(end - at[k]) != len0 || memcmp(at[k], start0, len0))))
                bad = 2;
            if (num && !bad) {
                errno = 0;
                unsigned long long v = strtoull(at[k], NULL, 10);
                if (errno || sum + v < sum) bad = 1;
                sum += v;
            }
            at[k] = end;
        }
        if (bad)
            rc = dm_set_error(bad == 2 ? "%s: the parts' %s are not laid out alike: not parts of "
                                         "one run"
                                       : "%s: %s is not a text of whole numbers",
                              parts[0]->dir, name);
        else if (num)
            fprintf(f, "%llu", sum);
        else
            fwrite(start0, 1, len0, f);
    }
    for (int k = 1; k < n && rc == 0; k++)
        if (*at[k]) rc = dm_set_error("%s/%s is longer than part 1's", parts[k]->dir, name);
    if (f && (fclose(f) != 0) && rc == 0) rc = dm_set_error("cannot write %s: disk full?", out);
    for (int k = 0; k < n; k++) free(text[k]);
    free(text);
    free(at);
    return rc;
}
/* ---- sparse matrices ---- */

typedef struct dot_entry {
    unsigned long long key; /* row << 32 | col, both 1-based */
    unsigned long long count;
} dot_entry;

static int cmp_entry(const void *a, const void *b)
{
    unsigned long long x = ((const dot_entry *)a)->key, y = ((const dot_entry *)b)->key;
    return x < y ? -1 : x > y;
}

/* "row col count" lines as track/track_sparse.c writes them (sorted by row, then column; the
 * last line "rows cols N", with N 0 where that entry is empty): the entries of every part
 * summed per (row, col) and written the same way. */
static int merge_dot(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    size_t cap = 1024, count = 0;
    dot_entry *e = malloc(cap * sizeof *e);
    unsigned long long last = 0;
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = read_part_file(parts[k], name, &len), *p = text;
        if (!text) rc = -1;
        unsigned long long part_last = 0;
        while (rc == 0 && *p) {
            unsigned int r, c;
            unsigned long long v;
            int used = 0;
            if (sscanf(p, "%u %u %llu\n%n", &r, &c, &v, &used) != 3 || !used || p[used - 1] != '\n')
                rc = dm_set_error("%s/%s: not a sparse matrix of \"row col count\" lines",
                                  parts[k]->dir, name);
            p += used;
            part_last = (unsigned long long)r << 32 | c;
            if (rc == 0 && v) {
                if (count == cap) e = realloc(e, (cap *= 2) * sizeof *e);
                e[count++] = (dot_entry){part_last, v};
            }
        }
        if (rc == 0 && k > 0 && part_last != last)
            rc = dm_set_error("%s/%s: its size differs from part 1's: not parts of one run",
                              parts[k]->dir, name);
        last = part_last;
        free(text);
    }
    if (rc == 0 && !last) rc = dm_set_error("%s/%s: an empty matrix file", parts[0]->dir, name);
    qsort(e, count, sizeof *e, cmp_entry);
    FILE *f = rc == 0 ? fopen(out, "wb") : NULL;
    if (rc == 0 && !f) rc = dm_set_error("cannot write %s: %s", out, strerror(errno));
    for (size_t i = 0; rc == 0 && i < count;) {
        unsigned long long key = e[i].key, sum = 0;
        for (; i < count && e[i].key == key; i++) sum += e[i].count;
        fprintf(f, "%u %u %llu\n", (unsigned)(key >> 32), (unsigned)key, sum);
    }
    if (rc == 0 && (!count || e[count - 1].key != last))
        fprintf(f, "%u %u 0\n", (unsigned)(last >> 32), (unsigned)last);
    if (f && fclose(f) != 0 && rc == 0) rc = dm_set_error("cannot write %s: disk full?", out);
    free(e);
    return rc;
}

/* ---- means ---- */

static int parse_u128(const char **p, unsigned __int128 *v)
{
    const char *q = *p;
    unsigned __int128 x = 0;
    if (*q < '0' || *q > '9') return -1;
    for (; *q >= '0' && *q <= '9'; q++) {
        unsigned __int128 y = x * 10 + (unsigned)(*q - '0');
        if (y / 10 != x) return -1; /* overflow */
        x = y;
    }
    *p = q;
    *v = x;
    return 0;
}

/* NAME of means (mean_length.csv) from each part's ".NAME.sums": a line "nodes N", then N x N
 * lines "count sum" (sum: the exact sum of the values as whole multiples of 2^-64, see
 * fodtrack/connectome.h).  Counts and sums added, then written as dm_connectome_write_csv
 * writes the means: the upper triangle with the diagonal, 0 below and where the count is 0,
 * "%.15g" separated by ',' in rows. */
static int merge_mean(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    char sums_name[512];
    snprintf(sums_name, sizeof sums_name, ".%s.sums", name);
    int nodes = -1, rc = 0;
    unsigned long long *count = NULL;
    unsigned __int128 *sum = NULL;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = read_part_file(parts[k], sums_name, &len);
        const char *p = text;
        int nk = -1, used = 0;
        if (!text || sscanf(p, "nodes %d\n%n", &nk, &used) != 1 || !used || nk < 0 ||
            (k > 0 && nk != nodes))
            rc = text ? dm_set_error("%s/%s: not the sums of %s's means of one run", parts[k]->dir,
                                     sums_name, name)
                      : -1;
        if (rc == 0 && k == 0) {
            nodes = nk;
            count = calloc((size_t)nodes * nodes + 1, sizeof *count);
            sum = calloc((size_t)nodes * nodes + 1, sizeof *sum);
        }
        p += used;
        for (size_t e = 0; rc == 0 && e < (size_t)nodes * nodes; e++) {
            unsigned __int128 c = 0, v = 0;
            if (parse_u128(&p, &c) != 0 || *p++ != ' ' || parse_u128(&p, &v) != 0 || *p++ != '\n')
                rc = dm_set_error("%s/%s: line %zu is not \"count sum\"", parts[k]->dir, sums_name,
                                  e + 2);
            count[e] += (unsigned long long)c;
            sum[e] += v;
        }
        free(text);
    }
    FILE *f = rc == 0 ? fopen(out, "wb") : NULL;
    if (rc == 0 && !f) rc = dm_set_error("cannot write %s: %s", out, strerror(errno));
    for (int i = 0; rc == 0 && i < nodes; i++)
        for (int j = 0; j < nodes; j++) {
            size_t e = (size_t)i * nodes + j;
            double x = 0;
            if (j >= i && count[e] > 0) x = (double)sum[e] * 0x1p-64 / (double)count[e];
            fprintf(f, "%.15g%c", x, j + 1 < nodes ? ',' : '\n');
        }
    if (f && fclose(f) != 0 && rc == 0) rc = dm_set_error("cannot write %s: disk full?", out);
    free(count);
    free(sum);
    return rc;
}

/* ---- the parts checked against each other ---- */

static int same_files(const dm_part_manifest *a, const dm_part_manifest *b)
{
    if (a->nfiles != b->nfiles) return 0;
    for (int i = 0; i < a->nfiles; i++)
        if (strcmp(a->files[i].name, b->files[i].name) || a->files[i].how != b->files[i].how)
            return 0;
    return 1;
}

/* parts[k-1] = the manifest of part k; every part present once, of one run. */
static int order_parts(dm_part_manifest *m, int ndirs, dm_part_manifest ***sorted)
{
    int n = m[0].n, voxels = 0;
    dm_part_manifest **parts = calloc((size_t)n, sizeof *parts);
    *sorted = parts;
    for (int i = 0; i < ndirs; i++) {
        if (m[i].n != n)
            return dm_set_error("%s is part %d of %d, but %s is of %d parts", m[i].dir, m[i].k,
                                m[i].n, m[0].dir, n);
        if (strcmp(m[i].command, m[0].command) || !same_files(&m[i], &m[0]))
            return dm_set_error("%s and %s are parts of different runs (command: %s / %s)",
                                m[0].dir, m[i].dir, m[0].command, m[i].command);
        if (parts[m[i].k - 1])
            return dm_set_error("%s and %s both hold part %d of %d", parts[m[i].k - 1]->dir,
                                m[i].dir, m[i].k, n);
        parts[m[i].k - 1] = &m[i];
    }
    for (int k = 0; k < n; k++)
        if (!parts[k])
            return dm_set_error("part %d of %d is missing: no folder given holds it finished "
                                "(run it again with --part %d/%d)",
                                k + 1, n, k + 1, n);
    for (int i = 0; i < m[0].nfiles; i++) voxels |= m[0].files[i].how == DM_MERGE_VOXELS;
    for (int k = 0; voxels && k < n; k++) {
        size_t expect = k ? parts[k - 1]->voxel_end : 0;
        if (parts[k]->nvox != parts[0]->nvox || parts[k]->voxel_first != expect ||
            parts[k]->voxel_end < expect || (k == n - 1 && parts[k]->voxel_end != parts[k]->nvox))
            return dm_set_error("%s: its voxel range [%zu, %zu) does not follow part %d's",
                                parts[k]->dir, parts[k]->voxel_first, parts[k]->voxel_end, k);
    }
    return 0;
}

static int write_provenance(dm_part_manifest *const parts[], int n, const char *dir)
{
    dm_provenance p;
    dm_provenance_begin(&p, "merge");
    dm_provenance_str(&p, DM_PROV_OPTION, "parts_command", parts[0]->command);
    dm_provenance_num(&p, DM_PROV_RESULT, "parts", n);
    dm_provenance_num(&p, DM_PROV_RESULT, "files", parts[0]->nfiles);
    /* the folders, as many as the record holds (every part's own record is kept below) */
    for (int k = 0; k < n && k < DM_PROV_MAX - 8; k++) {
        char key[32];
        snprintf(key, sizeof key, "part%d", k + 1);
        dm_provenance_str(&p, DM_PROV_INPUT, key, parts[k]->dir);
    }
    char *path = dm_path_join(dir, "provenance.json");
    int rc = dm_provenance_write(&p, path);
    free(path);
    dm_provenance_free(&p);
    /* each part's own record beside it: parts/provenance.K.json */
    char *sub = dm_path_join(dir, "parts");
    if (rc == 0) rc = dm_mkdir_p(sub);
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = read_part_file(parts[k], "provenance.json", &len);
        if (!text) continue; /* a command without one */
        char name[48];
        snprintf(name, sizeof name, "provenance.%d.json", k + 1);
        char *to = dm_path_join(sub, name);
        rc = write_bytes(to, text, len);
        free(to);
        free(text);
    }
    free(sub);
    return rc;
}

int dm_merge_parts(char *const dirs[], int ndirs, const char *out, int quiet)
{
    if (ndirs < 1) return dm_set_error("merge: give the part folders to join");
    dm_part_manifest *m = calloc((size_t)ndirs, sizeof *m);
    dm_part_manifest **parts = NULL;
    int rc = 0, read = 0;
    for (; read < ndirs && rc == 0; read++) rc = dm_part_manifest_read(dirs[read], &m[read]);
    if (rc == 0) rc = order_parts(m, ndirs, &parts);
    dm_outdir od = {0};
    if (rc == 0) rc = dm_outdir_begin(&od, out, DM_OUTDIR_REPLACE);
    int n = m[0].n, began = rc == 0;
    dm_progress *prog = rc == 0 && !quiet ? dm_progress_start("merge", m[0].nfiles, "files") : 0;
    /* One file after another: the reads and writes of each are spread over all cores by the
     * blocks of its gzip members (io/gz_blocks.h), which keeps every core busy on the large
     * 4D files where parallel files would leave a few threads with most of the work. */
    for (int i = 0; rc == 0 && i < m[0].nfiles; i++) {
        if (dm_stop_requested()) {
            rc = dm_stop_error();
            break;
        }
        const dm_part_file *f = &m[0].files[i];
        char *to = dm_path_join(od.path, f->name);
        switch (f->how) {
        case DM_MERGE_VOXELS: rc = merge_voxels(parts, n, f->name, to); break;
        case DM_MERGE_SUM: rc = merge_sum(parts, n, f->name, to); break;
        case DM_MERGE_SAME: rc = merge_same(parts, n, f->name, to); break;
        case DM_MERGE_TCK: rc = merge_tck(parts, n, f->name, to, out); break;
        case DM_MERGE_LINES: rc = merge_lines(parts, n, f->name, to); break;
        case DM_MERGE_CONCAT: rc = merge_concat(parts, n, f->name, to); break;
        case DM_MERGE_COUNTS: rc = merge_counts(parts, n, f->name, to); break;
        case DM_MERGE_DOT: rc = merge_dot(parts, n, f->name, to); break;
        case DM_MERGE_MEAN: rc = merge_mean(parts, n, f->name, to); break;
        case DM_MERGE_PART: break; /* read by another file's merge */
        }
        free(to);
        if (prog) dm_progress_add(prog, 1);
    }
    if (prog) dm_progress_finish(prog, NULL);
    if (rc == 0) rc = write_provenance(parts, n, od.path);
    if (began) {
        if (rc == 0)
            rc = dm_outdir_commit(&od);
        else
            dm_outdir_abort(&od);
    }
    for (int i = 0; i < read; i++) dm_part_manifest_free(&m[i]);
    free(m);
    free(parts);
    return rc;
}
