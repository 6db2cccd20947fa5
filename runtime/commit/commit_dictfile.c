/* COMMIT's dictionary saved and read back (commit_dictfile.h says the format). */
#include "commit/commit_dictfile.h"

#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char MAGIC[8] = {'D', 'M', 'C', 'O', 'M', 'D', 'I', 'C'};
/* format 1: no blur, 200 bytes; format 2: blur, its four numbers after format 1's fields;
 * format 3: blur of some streamlines only (--blur-apply-to), the flags' hash after format 2's */
enum {
    VERSION = 1,
    VERSION_BLUR = 2,
    VERSION_BLUR_SOME = 3,
    HEADER_BYTES = 200,
    HEADER_BLUR_BYTES = 232,
    HEADER_BLUR_SOME_BYTES = 240
};

/* A format's header size (0: not a format this dimoc reads). */
static size_t header_bytes(unsigned version)
{
    return version == VERSION             ? HEADER_BYTES
           : version == VERSION_BLUR      ? HEADER_BLUR_BYTES
           : version == VERSION_BLUR_SOME ? HEADER_BLUR_SOME_BYTES
                                          : 0;
}
enum { STR_BYTES = 16, SEG_BYTES = 10 };

/* ---- the checksums ---- */

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static uint64_t hash_block(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h ^= w * 0x87c37b91114253d5ULL;
        h = (h << 31 | h >> 33) * 0x4cf5ad432745937fULL;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return mix64(h);
}

/* Blocks of 1 MiB hashed on the threads, their hashes joined in order: the same value whatever
 * the number of threads. */
static uint64_t hash_bytes(const void *data, size_t n, uint64_t seed, int threads)
{
    const size_t B = (size_t)1 << 20, nb = (n + B - 1) / B;
    const unsigned char *p = data;
    uint64_t *bh = malloc((nb ? nb : 1) * sizeof *bh);
    uint64_t h = mix64(seed ^ (uint64_t)n);
    if (!bh) { /* no room for the block hashes: the same sums, one after another */
        for (size_t i = 0; i < nb; i++)
            h = mix64(h ^ hash_block(p + i * B, n - i * B < B ? n - i * B : B));
        return h;
    }
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
    for (size_t i = 0; i < nb; i++) bh[i] = hash_block(p + i * B, n - i * B < B ? n - i * B : B);
    for (size_t i = 0; i < nb; i++) h = mix64(h ^ bh[i]);
    free(bh);
    return h;
}

void dm_commit_dict_facts_make(const dm_tck *t, const dm_commit_grid *g, unsigned ndirs,
                               const dm_commit_dict_options *o, int threads,
                               dm_commit_dict_facts *f)
{
    memset(f, 0, sizeof *f);
    f->nstr = (uint64_t)t->count;
    uint64_t h = hash_bytes(t->npoints, (size_t)t->count * sizeof *t->npoints, 1, threads);
    f->tck_hash = hash_bytes(t->xyz, (size_t)t->start[t->count] * 3 * sizeof *t->xyz, h, threads);
    f->nx = g->nx;
    f->ny = g->ny;
    f->nz = g->nz;
    f->has_mask = g->mask != NULL;
    if (g->mask) f->mask_hash = hash_bytes(g->mask, (size_t)g->nx * g->ny * g->nz, 2, threads);
    f->ndirs = ndirs;
    memcpy(f->w2v, g->w2v, sizeof f->w2v);
    memcpy(f->shift, o->shift, sizeof f->shift);
    f->min_seg_len = o->min_seg_len;
    f->min_len = o->min_len;
    f->max_len = o->max_len;
    if (dm_commit_blur_on(o)) {
        f->blur_core = o->blur_core;
        f->blur_gauss = o->blur_gauss;
        f->blur_spacing = o->blur_spacing;
        f->blur_gauss_min = o->blur_gauss_min;
        if (o->blur_apply) { /* never 0: 0 means every streamline blurred */
            f->blur_apply_hash = hash_bytes(o->blur_apply, (size_t)t->count, 3, threads);
            f->blur_apply_hash += f->blur_apply_hash == 0;
        }
    }
}

static int facts_blur(const dm_commit_dict_facts *f)
{
    return f->blur_core > 0 || f->blur_gauss > 0;
}

/* ---- little-endian fields ---- */

static unsigned char *put_u(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + bytes;
}

static uint64_t get_u(const unsigned char **p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)(*p)[i] << (8 * i);
    *p += bytes;
    return v;
}

static unsigned char *put_f32(unsigned char *p, float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return put_u(p, u, 4);
}

static float get_f32(const unsigned char **p)
{
    uint32_t u = (uint32_t)get_u(p, 4);
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static unsigned char *put_f64(unsigned char *p, double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return put_u(p, u, 8);
}

static double get_f64(const unsigned char **p)
{
    uint64_t u = get_u(p, 8);
    double x;
    memcpy(&x, &u, 8);
    return x;
}

/* The header: magic, u32 version, u32 ndirs, u64 streamlines, u64 tractogram hash, i32 nx, ny,
 * nz, u32 has_mask, u64 mask hash, f64 w2v[3][4], shift[3], min_seg_len, min_len, max_len; with
 * blur (format 2) f64 blur core, gauss extent, spacing, gauss min.  Its size in bytes. */
static size_t header_encode(const dm_commit_dict_facts *f, unsigned char *b)
{
    memcpy(b, MAGIC, 8);
    unsigned char *p = b + 8;
    p = put_u(p,
              !facts_blur(f)       ? VERSION
              : f->blur_apply_hash ? VERSION_BLUR_SOME
                                   : VERSION_BLUR,
              4);
    p = put_u(p, f->ndirs, 4);
    p = put_u(p, f->nstr, 8);
    p = put_u(p, f->tck_hash, 8);
    p = put_u(p, (uint32_t)f->nx, 4);
    p = put_u(p, (uint32_t)f->ny, 4);
    p = put_u(p, (uint32_t)f->nz, 4);
    p = put_u(p, (uint32_t)f->has_mask, 4);
    p = put_u(p, f->mask_hash, 8);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) p = put_f64(p, f->w2v[i][j]);
    for (int i = 0; i < 3; i++) p = put_f64(p, f->shift[i]);
    p = put_f64(p, f->min_seg_len);
    p = put_f64(p, f->min_len);
    p = put_f64(p, f->max_len);
    if (!facts_blur(f)) return HEADER_BYTES;
    p = put_f64(p, f->blur_core);
    p = put_f64(p, f->blur_gauss);
    p = put_f64(p, f->blur_spacing);
    p = put_f64(p, f->blur_gauss_min);
    if (!f->blur_apply_hash) return HEADER_BLUR_BYTES;
    put_u(p, f->blur_apply_hash, 8);
    return HEADER_BLUR_SOME_BYTES;
}

static unsigned header_decode(const unsigned char *b, dm_commit_dict_facts *f)
{
    const unsigned char *p = b + 8;
    unsigned version = (unsigned)get_u(&p, 4);
    f->ndirs = (unsigned)get_u(&p, 4);
    f->nstr = get_u(&p, 8);
    f->tck_hash = get_u(&p, 8);
    f->nx = (int)(uint32_t)get_u(&p, 4);
    f->ny = (int)(uint32_t)get_u(&p, 4);
    f->nz = (int)(uint32_t)get_u(&p, 4);
    f->has_mask = (int)get_u(&p, 4);
    f->mask_hash = get_u(&p, 8);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) f->w2v[i][j] = get_f64(&p);
    for (int i = 0; i < 3; i++) f->shift[i] = get_f64(&p);
    f->min_seg_len = get_f64(&p);
    f->min_len = get_f64(&p);
    f->max_len = get_f64(&p);
    f->blur_core = f->blur_gauss = f->blur_spacing = f->blur_gauss_min = 0;
    f->blur_apply_hash = 0;
    if (version == VERSION_BLUR || version == VERSION_BLUR_SOME) {
        f->blur_core = get_f64(&p);
        f->blur_gauss = get_f64(&p);
        f->blur_spacing = get_f64(&p);
        f->blur_gauss_min = get_f64(&p);
    }
    if (version == VERSION_BLUR_SOME) f->blur_apply_hash = get_u(&p, 8);
    return version;
}

/* ---- saving ---- */

static int write_header(const char *dir, const dm_commit_dict_facts *f)
{
    unsigned char b[HEADER_BLUR_SOME_BYTES];
    const size_t nb = header_encode(f, b);
    char *path = dm_path_join(dir, DM_COMMIT_DICT_HEADER);
    FILE *out = fopen(path, "wb");
    int rc = 0;
    if (!out) {
        rc = dm_set_error("cannot write %s: %s", path, strerror(errno));
    } else {
        int bad = fwrite(b, 1, nb, out) != nb;
        if ((fclose(out) != 0) | bad) rc = dm_set_error("cannot write %s: disk full?", path);
    }
    free(path);
    return rc;
}

int dm_commit_dict_save(const char *dir, const dm_commit_dict_facts *f, const dm_commit_dict *d,
                        long first, long end)
{
    if (end > (long)UINT32_MAX)
        return dm_set_error("commit: a saved dictionary holds at most %u streamlines", UINT32_MAX);
    if (write_header(dir, f) != 0) return -1;
    char *path = dm_path_join(dir, DM_COMMIT_DICT_RECORDS);
    FILE *out = fopen(path, "wb");
    if (!out) {
        dm_set_error("cannot write %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    setvbuf(out, NULL, _IOFBF, 1 << 22);
    size_t cap = 4096;
    unsigned char *buf = malloc(cap);
    int bad = !buf;
    int stopped = 0;
    for (long s = first; s < end && !bad; s++) {
        if ((s & 0xffff) == 0 && (stopped = dm_stop_requested())) break;
        const long c = d->column[s];
        const long a = c >= 0 ? d->str_start[c] : 0, nseg = c >= 0 ? d->str_start[c + 1] - a : 0;
        const size_t need = STR_BYTES + (size_t)nseg * SEG_BYTES;
        if (need > cap) {
            free(buf);
            buf = malloc(cap = 2 * need);
            if (!buf) break;
        }
        unsigned char *p = put_u(buf, (uint64_t)s, 4);
        p = put_u(p, (uint64_t)nseg, 4);
        p = put_f32(p, d->length[s]);
        p = put_f32(p, d->norm[s]);
        for (long q = a; q < a + nseg; q++) {
            p = put_u(p, d->seg_vox[q], 4);
            p = put_u(p, d->seg_dir[q], 2);
            p = put_f32(p, d->seg_len[q]);
        }
        bad = fwrite(buf, 1, need, out) != need;
    }
    int oom = !buf;
    free(buf);
    bad |= fclose(out) != 0;
    int rc = 0;
    if (stopped)
        rc = dm_stop_error();
    else if (oom)
        rc = dm_set_error("commit: out of memory writing %s", path);
    else if (bad)
        rc = dm_set_error("cannot write %s: disk full?", path);
    free(path);
    return rc;
}

/* ---- loading ---- */

/* The first fact of `got` that is not `want`'s, in words (NULL: none). */
static const char *facts_differ(const dm_commit_dict_facts *got, const dm_commit_dict_facts *want,
                                char *why, size_t len)
{
    if (got->nstr != want->nstr)
        snprintf(why, len, "it is of a tractogram of %llu streamlines, --tractogram has %llu",
                 (unsigned long long)got->nstr, (unsigned long long)want->nstr);
    else if (got->tck_hash != want->tck_hash)
        snprintf(why, len,
                 "it was made from other streamlines than --tractogram's (the same "
                 "count, other points)");
    else if (got->nx != want->nx || got->ny != want->ny || got->nz != want->nz ||
             memcmp(got->w2v, want->w2v, sizeof got->w2v))
        snprintf(why, len, "it was made on another image grid (%dx%dx%d) than --data's (%dx%dx%d)",
                 got->nx, got->ny, got->nz, want->nx, want->ny, want->nz);
    else if (got->has_mask != want->has_mask || got->mask_hash != want->mask_hash)
        snprintf(why, len, "%s",
                 !got->has_mask    ? "it was made without --mask, this run has one"
                 : !want->has_mask ? "it was made with a --mask, this run has none"
                                   : "it was made with another --mask than this run's");
    else if (memcmp(got->shift, want->shift, sizeof got->shift))
        snprintf(why, len, "it was made with --fiber-shift %g,%g,%g, this run has %g,%g,%g",
                 got->shift[0], got->shift[1], got->shift[2], want->shift[0], want->shift[1],
                 want->shift[2]);
    else if (got->min_seg_len != want->min_seg_len)
        snprintf(why, len, "it was made with --min-seg-len %g, this run has %g", got->min_seg_len,
                 want->min_seg_len);
    else if (got->min_len != want->min_len || got->max_len != want->max_len)
        snprintf(why, len,
                 "it was made with --min-length %g --max-length %g, this run has %g and %g",
                 got->min_len, got->max_len, want->min_len, want->max_len);
    else if (got->blur_core != want->blur_core || got->blur_gauss != want->blur_gauss ||
             got->blur_spacing != want->blur_spacing ||
             got->blur_gauss_min != want->blur_gauss_min) {
        if (!facts_blur(got))
            snprintf(why, len,
                     "it was made without blur, this run has --blur-core-extent %g "
                     "--blur-gauss-extent %g",
                     want->blur_core, want->blur_gauss);
        else if (!facts_blur(want))
            snprintf(why, len,
                     "it was made with blur (--blur-core-extent %g --blur-gauss-extent "
                     "%g), this run has none",
                     got->blur_core, got->blur_gauss);
        else
            snprintf(why, len,
                     "it was made with --blur-core-extent %g --blur-gauss-extent %g "
                     "--blur-spacing %g --blur-gauss-min %g, this run has %g, %g, %g and %g",
                     got->blur_core, got->blur_gauss, got->blur_spacing, got->blur_gauss_min,
                     want->blur_core, want->blur_gauss, want->blur_spacing, want->blur_gauss_min);
    } else if (got->blur_apply_hash != want->blur_apply_hash)
        snprintf(why, len, "%s",
                 !got->blur_apply_hash    ? "it was made without --blur-apply-to, this run has it"
                 : !want->blur_apply_hash ? "it was made with --blur-apply-to, this run has none"
                                          : "it was made with another --blur-apply-to file's "
                                            "flags than this run's");
    else if (got->ndirs != want->ndirs)
        snprintf(why, len,
                 "it was made with %u lookup directions (--ndirs; 1 for volume-fractions), this "
                 "run has %u",
                 got->ndirs, want->ndirs);
    else
        return NULL;
    return why;
}

static int read_header(const char *dir, const dm_commit_dict_facts *want)
{
    char *path = dm_path_join(dir, DM_COMMIT_DICT_HEADER);
    size_t len = 0;
    char *text = dm_read_file(path, &len);
    int rc = 0;
    dm_commit_dict_facts got;
    char why[512];
    if (!text) {
        rc = dm_set_error("commit: --dictionary %s: no %s: not a folder written by dimoc commit "
                          "--stage dictionary (or dimoc merge of its parts)",
                          dir, DM_COMMIT_DICT_HEADER);
    } else if ((len != HEADER_BYTES && len != HEADER_BLUR_BYTES && len != HEADER_BLUR_SOME_BYTES) ||
               memcmp(text, MAGIC, 8)) {
        rc = dm_set_error("commit: --dictionary %s: %s is not a dictionary header of dimoc "
                          "commit",
                          dir, DM_COMMIT_DICT_HEADER);
    } else {
        const unsigned char *q = (const unsigned char *)text + 8;
        unsigned version = (unsigned)get_u(&q, 4);
        if (!header_bytes(version))
            rc = dm_set_error("commit: --dictionary %s: format %u; this dimoc reads formats %d "
                              "to %d (make the dictionary again)",
                              dir, version, VERSION, VERSION_BLUR_SOME);
        else if (len != header_bytes(version))
            rc = dm_set_error("commit: --dictionary %s: %s is not a dictionary header of dimoc "
                              "commit (format %u of %zu bytes)",
                              dir, DM_COMMIT_DICT_HEADER, version, len);
        else if (header_decode((const unsigned char *)text, &got),
                 facts_differ(&got, want, why, sizeof why))
            rc = dm_set_error("commit: --dictionary %s was not made from this run's inputs and "
                              "options: %s (make it again, or run without --dictionary)",
                              dir, why);
    }
    free(text);
    free(path);
    return rc;
}

int dm_commit_dict_load(const char *dir, const dm_commit_dict_facts *want, const dm_commit_grid *g,
                        dm_commit_dict *d)
{
    memset(d, 0, sizeof *d);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dm_set_error("commit: --dictionary %s: no such folder", dir);
    char *manifest = dm_path_join(dir, "part.json");
    int is_part = stat(manifest, &st) == 0;
    free(manifest);
    if (is_part)
        return dm_set_error("commit: --dictionary %s holds one part of a dictionary: join the "
                            "parts first (dimoc merge PART_DIR... --out DIR)",
                            dir);
    if (read_header(dir, want) != 0) return -1;

    char *path = dm_path_join(dir, DM_COMMIT_DICT_RECORDS);
    FILE *in = fopen(path, "rb");
    const long n = (long)want->nstr;
    const size_t nvox_grid = (size_t)g->nx * g->ny * g->nz;
    unsigned char *buf = NULL;
    int rc = 0;
    if (!in || fstat(fileno(in), &st) != 0) {
        rc = dm_set_error("commit: --dictionary %s: cannot read %s: %s", dir,
                          DM_COMMIT_DICT_RECORDS, strerror(errno));
        goto done;
    }
    /* the file's size fixes the segment count: 16 bytes a streamline, 10 a segment */
    const long long size = (long long)st.st_size, rest = size - (long long)n * STR_BYTES;
    if (rest < 0 || rest % SEG_BYTES) {
        rc = dm_set_error("commit: --dictionary %s: %s is not the records of %ld streamlines (%lld "
                          "bytes): a part missing, or a damaged file",
                          dir, DM_COMMIT_DICT_RECORDS, n, size);
        goto done;
    }
    const long nseg = (long)(rest / SEG_BYTES);
    setvbuf(in, NULL, _IOFBF, 1 << 22);
    d->nstr = n;
    d->kept = calloc((size_t)(n ? n : 1), 1);
    d->length = calloc((size_t)(n ? n : 1), sizeof *d->length);
    d->norm = calloc((size_t)(n ? n : 1), sizeof *d->norm);
    d->column = malloc((size_t)(n ? n : 1) * sizeof *d->column);
    d->str_start = malloc((size_t)(n + 1) * sizeof *d->str_start);
    d->seg_vox = malloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_vox);
    d->seg_dir = malloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_dir);
    d->seg_len = malloc((size_t)(nseg ? nseg : 1) * sizeof *d->seg_len);
    size_t cap = 1 << 16;
    buf = malloc(cap);
    if (!d->kept || !d->length || !d->norm || !d->column || !d->str_start || !d->seg_vox ||
        !d->seg_dir || !d->seg_len || !buf) {
        rc = dm_set_error("commit: out of memory for the dictionary of %s", dir);
        goto done;
    }
    long at = 0, nk = 0;
    for (long s = 0; s < n && rc == 0; s++) {
        if ((s & 0xffff) == 0 && dm_stop_requested()) {
            rc = dm_stop_error();
            break;
        }
        const unsigned char *p = buf;
        if (fread(buf, 1, STR_BYTES, in) != STR_BYTES) {
            rc = dm_set_error("commit: --dictionary %s: %s ends at streamline %ld of %ld", dir,
                              DM_COMMIT_DICT_RECORDS, s, n);
            break;
        }
        long id = (long)get_u(&p, 4), ns = (long)get_u(&p, 4);
        float length = get_f32(&p), norm = get_f32(&p);
        if (id != s) {
            rc = dm_set_error("commit: --dictionary %s: %s holds streamline %ld where %ld belongs: "
                              "parts missing, repeated or out of order",
                              dir, DM_COMMIT_DICT_RECORDS, id, s);
            break;
        }
        d->column[s] = -1;
        if (ns == 0) continue;
        if (ns > nseg - at) {
            rc = dm_set_error("commit: --dictionary %s: %s: streamline %ld's segments run past the "
                              "end of the file",
                              dir, DM_COMMIT_DICT_RECORDS, s);
            break;
        }
        const size_t need = (size_t)ns * SEG_BYTES;
        if (need > cap) {
            free(buf);
            if (!(buf = malloc(cap = 2 * need))) {
                rc = dm_set_error("commit: out of memory for the dictionary of %s", dir);
                break;
            }
        }
        if (fread(buf, 1, need, in) != need) {
            rc = dm_set_error("commit: --dictionary %s: %s ends within streamline %ld", dir,
                              DM_COMMIT_DICT_RECORDS, s);
            break;
        }
        p = buf;
        d->kept[s] = 1;
        d->length[s] = length;
        d->norm[s] = norm;
        d->column[s] = nk;
        d->str_start[nk++] = at;
        for (long i = 0; i < ns; i++, at++) {
            unsigned vox = (unsigned)get_u(&p, 4), dir_ = (unsigned)get_u(&p, 2);
            float len = get_f32(&p);
            if (vox >= nvox_grid || (g->mask && !g->mask[vox]) || dir_ >= want->ndirs ||
                !(len > 0) || !isfinite(len)) {
                rc = dm_set_error("commit: --dictionary %s: %s: streamline %ld has a segment "
                                  "outside the grid, the mask or the directions: a damaged file",
                                  dir, DM_COMMIT_DICT_RECORDS, s);
                break;
            }
            d->seg_vox[at] = vox;
            d->seg_dir[at] = (unsigned short)dir_;
            d->seg_len[at] = len;
        }
    }
    if (rc == 0 && at != nseg)
        rc = dm_set_error("commit: --dictionary %s: %s goes on after its last streamline: a "
                          "damaged file",
                          dir, DM_COMMIT_DICT_RECORDS);
    if (rc == 0) {
        d->str_start[nk] = at;
        d->nkept = nk;
        d->nseg = at;
    }
done:
    if (in) fclose(in);
    free(buf);
    free(path);
    if (rc != 0) dm_commit_dict_free(d);
    return rc;
}
