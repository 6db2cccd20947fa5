/* dimoc merge: the part folders checked against each other, then each file joined by the
 * rule its manifest names (cluster/part.h): NIfTI voxels from their owning part, NIfTI sums,
 * identical files, .tck files, text lines and bytes one part after another. */
#include "cluster/merge.h"
#include "cluster/part_manifest.h"
#include "io/volume.h"
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

/* The streamlines of part 1, then part 2, ...; the header's counts the sums of the parts'. */
static int merge_tck(dm_part_manifest *const parts[], int n, const char *name, const char *out)
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
    FILE *f = rc == 0 ? fopen(out, "wb") : NULL;
    if (rc == 0 && !f) rc = dm_set_error("cannot write %s: %s", out, strerror(errno));
    if (f) {
        /* part 1's header with the sums in its fixed-width fields */
        char *head = t[0].header;
        char *cnt = strstr(head, "\ncount: ") + 8, *tot = strstr(head, "\ntotal_count: ") + 14;
        char num[32];
        snprintf(num, sizeof num, "%012llu", count);
        memcpy(cnt, num, 12);
        snprintf(num, sizeof num, "%012llu", total);
        memcpy(tot, num, 12);
        if (fwrite(head, 1, (size_t)t[0].offset, f) != (size_t)t[0].offset) rc = -1;
        for (int k = 0; k < n && rc == 0; k++) rc = copy_span(t[k].f, t[k].offset, t[k].body, f);
        const float inf[3] = {INFINITY, INFINITY, INFINITY};
        if (rc == 0 && fwrite(inf, 4, 3, f) != 3) rc = -1;
        if ((fclose(f) != 0 || rc != 0) && rc == 0) rc = -1;
        if (rc != 0) rc = dm_set_error("cannot write %s: disk full?", out);
    }
    for (int k = 0; k < n; k++) {
        if (t[k].f) fclose(t[k].f);
        free(t[k].header);
    }
    free(t);
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
        case DM_MERGE_TCK: rc = merge_tck(parts, n, f->name, to); break;
        case DM_MERGE_LINES: rc = merge_lines(parts, n, f->name, to); break;
        case DM_MERGE_CONCAT: rc = merge_concat(parts, n, f->name, to); break;
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
