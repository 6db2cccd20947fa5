/* `dimoc merge` of text and bytes: identical files, lines and bytes part after part, whole
 * numbers and sparse matrices summed, means from sums (merge_kinds.h). */
#include "cluster/merge_kinds.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dm_merge_write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    int bad = len && fwrite(data, 1, len, f) != len;
    if ((fclose(f) != 0) | bad) return dm_set_error("cannot write %s: disk full?", path);
    return 0;
}

char *dm_merge_read_part_file(const dm_part_manifest *m, const char *name, size_t *len)
{
    char *path = dm_path_join(m->dir, name);
    char *text = dm_read_file(path, len);
    free(path);
    return text;
}

/* A file every part computed from the whole input: the same bytes in all. */
int dm_merge_same(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    size_t len0, len;
    char *first = dm_merge_read_part_file(parts[0], name, &len0);
    int rc = first ? 0 : -1;
    for (int k = 1; k < n && rc == 0; k++) {
        char *other = dm_merge_read_part_file(parts[k], name, &len);
        if (!other)
            rc = -1;
        else if (len != len0 || memcmp(first, other, len))
            rc = dm_set_error("%s/%s differs from part 1's: not parts of one run", parts[k]->dir,
                              name);
        free(other);
    }
    if (rc == 0) rc = dm_merge_write_bytes(out, first, len0);
    free(first);
    return rc;
}

/* Text lines of part 1, then part 2, ... */
int dm_merge_lines(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    FILE *f = fopen(out, "wb");
    if (!f) return dm_set_error("cannot write %s: %s", out, strerror(errno));
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = dm_merge_read_part_file(parts[k], name, &len);
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
int dm_merge_concat(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    FILE *f = fopen(out, "wb");
    if (!f) return dm_set_error("cannot write %s: %s", out, strerror(errno));
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    int rc = buf ? 0 : dm_set_error("out of memory");
    for (int k = 0; k < n && rc == 0; k++) {
        char *path = dm_path_join(parts[k]->dir, name);
        FILE *in = fopen(path, "rb");
        size_t got;
        if (!in) rc = dm_set_error("%s: cannot open: %s", path, strerror(errno));
        while (in && rc == 0 && (got = fread(buf, 1, CHUNK, in)) > 0)
            if (fwrite(buf, 1, got, f) != got)
                rc = dm_set_error("cannot write %s: disk full?", out);
        if (in && ferror(in) && rc == 0) rc = dm_set_error("%s: read error", path);
        if (in) fclose(in);
        free(path);
    }
    free(buf);
    if (fclose(f) != 0 && rc == 0) rc = dm_set_error("cannot write %s: disk full?", out);
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
int dm_merge_counts(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    char **text = calloc((size_t)n, sizeof *text);
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        text[k] = dm_merge_read_part_file(parts[k], name, &len);
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
int dm_merge_dot(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    size_t cap = 1024, count = 0;
    dot_entry *e = malloc(cap * sizeof *e);
    unsigned long long last = 0;
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = dm_merge_read_part_file(parts[k], name, &len), *p = text;
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
int dm_merge_mean(dm_part_manifest *const parts[], int n, const char *name, const char *out)
{
    char sums_name[512];
    snprintf(sums_name, sizeof sums_name, ".%s.sums", name);
    int nodes = -1, rc = 0;
    unsigned long long *count = NULL;
    unsigned __int128 *sum = NULL;
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = dm_merge_read_part_file(parts[k], sums_name, &len);
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
