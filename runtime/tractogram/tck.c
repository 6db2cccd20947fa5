/* .tck files: the writer (a header with fixed-width counts filled in at the end, then the
 * points) and the reader (the whole file in memory, checked strictly); the text file of
 * per-streamline weights that goes with one (MRtrix's -tck_weights_in). */
#define _GNU_SOURCE /* fallocate */
#include "tractogram/tck.h"
#include "io/bigalloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

struct dm_tck_writer {
    FILE *fp;
    char *path, *tmp;
    long count;
    long count_at; /* byte position of the fixed-width count field */
    int failed;
    int bare; /* points only: no header, no NaN triplets (dm_tck_open_points) */
};

/* Little-endian float32 whatever the host order. */
static void put_f32(FILE *fp, float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    unsigned char b[4] = {u & 255, (u >> 8) & 255, (u >> 16) & 255, u >> 24};
    fwrite(b, 1, 4, fp);
}

char *dm_tck_header(const char *info, size_t *len_out, long *count_at)
{
    /* The header is written with a fixed-width count and an offset computed so that the
     * "file:" line's own length is included.  Of `info`, only "key: value" lines whose key
     * the format does not reserve are kept (a stray "file:" or "END" would mislead readers). */
    size_t cap = 256 + (info ? 2 * strlen(info) : 0);
    char *head = malloc(cap);
    if (!head) {
        dm_set_error("out of memory");
        return NULL;
    }
    size_t len = (size_t)snprintf(head, cap, "mrtrix tracks\ndatatype: Float32LE\n");
    for (const char *line = info; line && *line;) {
        size_t n = strcspn(line, "\n");
        const char *colon = memchr(line, ':', n);
        static const char *const reserved[] = {"file", "count", "total_count", "datatype", NULL};
        int keep = colon && colon > line && !memchr(line, '\r', n) && !memchr(line, 0, n);
        for (int k = 0; keep && reserved[k]; k++)
            keep = !((size_t)(colon - line) == strlen(reserved[k]) &&
                     !strncmp(line, reserved[k], strlen(reserved[k])));
        if (keep) {
            memcpy(head + len, line, n);
            len += n;
            head[len++] = '\n';
        }
        line += n + (line[n] == '\n');
    }
    *count_at = (long)len + (long)strlen("count: ");
    len += (size_t)snprintf(head + len, cap - len, "count: %012ld\ntotal_count: %012ld\n", 0L, 0L);
    long offset = (long)len + 32; /* "file: . NNN\nEND\n" fits in 32 bytes with padding */
    len += (size_t)snprintf(head + len, cap - len, "file: . %ld\nEND\n", offset);
    for (; (long)len < offset; len++) head[len] = ' '; /* padding before the data */
    *len_out = len;
    return head;
}

dm_tck_writer *dm_tck_open(const char *path, const char *info)
{
    size_t len;
    long count_at;
    char *head = dm_tck_header(info, &len, &count_at);
    if (!head) return NULL;
    dm_tck_writer *w = calloc(1, sizeof *w);
    w->path = strdup(path);
    w->tmp = dm_temp_sibling(path);
    w->fp = fopen(w->tmp, "wb");
    if (w->fp) setvbuf(w->fp, NULL, _IOFBF, 1 << 22); /* large writes: a file of gigabytes */
    if (!w->fp) {
        dm_set_error("%s: cannot write: %s", path, strerror(errno));
        free(head);
        free(w->path);
        free(w->tmp);
        free(w);
        return NULL;
    }
    fwrite(head, 1, len, w->fp);
    free(head);
    w->count_at = count_at;
    return w;
}

dm_tck_writer *dm_tck_open_points(const char *path)
{
    dm_tck_writer *w = calloc(1, sizeof *w);
    if (!w) {
        dm_set_error("out of memory");
        return NULL;
    }
    w->bare = 1;
    w->tmp = strdup(path);
    w->fp = fopen(path, "wb");
    if (w->fp) setvbuf(w->fp, NULL, _IOFBF, 1 << 22);
    if (!w->fp) {
        dm_set_error("%s: cannot write: %s", path, strerror(errno));
        free(w->tmp);
        free(w);
        return NULL;
    }
    return w;
}

int dm_tck_close_points(dm_tck_writer *w)
{
    int bad = w->failed | ferror(w->fp);
    bad |= fclose(w->fp) != 0;
    int rc = bad ? dm_set_error("%s: cannot write", w->tmp) : 0;
    free(w->tmp);
    free(w);
    return rc;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

void dm_tck_add(dm_tck_writer *w, const float *xyz, int n)
{
    if (host_is_little_endian()) { /* the file's order: the points as they are, in one write */
        fwrite(xyz, sizeof *xyz, 3 * (size_t)n, w->fp);
    } else {
        for (int i = 0; i < 3 * n; i++) put_f32(w->fp, xyz[i]);
    }
    for (int a = 0; a < 3 && !w->bare; a++) put_f32(w->fp, NAN);
    w->count++;
}

/* One thread's share of dm_tck_add_many: streamlines [a, b) written at `at` in the file
 * straight from the points, each followed by the NaN triplet unless `bare` (gathered writes:
 * no copy).  0, or -1 when the write failed. */
static int write_share(int fd, off_t at, const float *xyz, const size_t *start, const int *npts,
                       long a, long b, int bare)
{
    static const float delimiter[3] = {NAN, NAN, NAN};
    enum { MAX_IOV = 512 }; /* within every system's IOV_MAX (1024 on Linux) */
    struct iovec iov[MAX_IOV];
    for (long i = a; i < b;) {
        int n = 0;
        size_t bytes = 0;
        for (; i < b && n + 2 <= MAX_IOV; i++) {
            iov[n++] = (struct iovec){(void *)(xyz + 3 * start[i]), 12 * (size_t)npts[i]};
            if (!bare) iov[n++] = (struct iovec){(void *)delimiter, sizeof delimiter};
            bytes += 12 * ((size_t)npts[i] + !bare);
        }
        /* a short write (rare: signals, full disks) finishes with plain writes */
        ssize_t done = pwritev(fd, iov, n, at);
        if (done < 0 && errno != EINTR) return -1;
        if (done < 0) done = 0;
        size_t end = 0;
        for (int k = 0; k < n && (size_t)done < bytes; k++) {
            end += iov[k].iov_len;
            while ((size_t)done < end) {
                const char *src = (const char *)iov[k].iov_base + iov[k].iov_len - (end - done);
                ssize_t w = pwrite(fd, src, end - (size_t)done, at + (off_t)done);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) return -1;
                done += w;
            }
        }
        at += (off_t)bytes;
    }
    return 0;
}

/* One thread's share of dm_tck_add_many into the file mapped at m (its bytes from the file's
 * start): streamlines [a, b) copied to m + at, each followed by the NaN triplet unless bare. */
static void copy_share(unsigned char *m, off_t at, const float *xyz, const size_t *start,
                       const int *npts, long a, long b, int bare)
{
    static const float delimiter[3] = {NAN, NAN, NAN};
    for (long i = a; i < b; i++) {
        const size_t bytes = 12 * (size_t)npts[i];
        memcpy(m + at, xyz + 3 * start[i], bytes);
        if (!bare) memcpy(m + at + bytes, delimiter, sizeof delimiter);
        at += (off_t)(bytes + (bare ? 0 : sizeof delimiter));
    }
}

/* The shares [first[j], first[j + 1]) written at at[j] (j < k) through a shared mapping of the
 * file, on all threads: buffered writes to one file are serialised by the file system (about
 * 4 GB/s), while page faults on a mapping are taken in parallel.  Only where the room can be
 * reserved first (fallocate: no full disk can then meet a fault, which would be a SIGBUS);
 * 0, or -1 where the file system offers no such reservation or mapping (nothing was written:
 * the caller writes instead), or the file system refused the room (full, quota). */
static int write_mapped(const char *tmp, off_t end, const float *xyz, const size_t *start,
                        const int *npts, const long *first, const off_t *at, long k, int threads,
                        int bare)
{
    int fd = open(tmp, O_RDWR);
    if (fd < 0) return -1;
    if (fallocate(fd, 0, at[0], end - at[0]) != 0) {
        close(fd);
        return -1;
    }
    unsigned char *m = mmap(NULL, (size_t)end, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (m == MAP_FAILED) return -1;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (long j = 0; j < k; j++)
        copy_share(m, at[j], xyz, start, npts, first[j], first[j + 1], bare);
    munmap(m, (size_t)end);
    return 0;
}

int dm_tck_add_many(dm_tck_writer *w, const float *xyz, const size_t *start, const int *npts,
                    long count, int threads)
{
    if (!host_is_little_endian() || threads <= 1 || count < 2) {
        for (long i = 0; i < count; i++) dm_tck_add(w, xyz + 3 * start[i], npts[i]);
        return w->failed ? -1 : 0;
    }
    /* shares of about equal bytes, each written where it goes: after the stream's buffer is
     * flushed, at the current end, then the stream moves past them */
    if (fflush(w->fp) != 0) return w->failed = -1;
    off_t base = ftello(w->fp);
    long shares = 4L * threads;
    long *first = malloc((size_t)(shares + 1) * sizeof *first);
    off_t *at = malloc((size_t)(shares + 1) * sizeof *at);
    size_t total = 0;
    const size_t delim = w->bare ? 0 : 1; /* a NaN triplet after each streamline */
    for (long i = 0; i < count; i++) total += 12 * ((size_t)npts[i] + delim);
    size_t sum = 0;
    long k = 0;
    first[0] = 0;
    at[0] = base;
    for (long i = 0; i < count && k < shares - 1; i++) {
        sum += 12 * ((size_t)npts[i] + delim);
        if (sum * (size_t)shares >= total * (size_t)(k + 1)) {
            first[++k] = i + 1;
            at[k] = base + (off_t)sum;
        }
    }
    first[++k] = count;
    at[k] = base + (off_t)total;
    int fd = fileno(w->fp), bad = 0;
    if (total < ((size_t)64 << 20) || write_mapped(w->tmp, base + (off_t)total, xyz, start, npts,
                                                   first, at, k, threads, w->bare) != 0) {
#pragma omp parallel for schedule(dynamic) num_threads(threads) reduction(| : bad)
        for (long j = 0; j < k; j++)
            bad |= write_share(fd, at[j], xyz, start, npts, first[j], first[j + 1], w->bare) != 0;
    }
    free(first);
    free(at);
    if (bad || fseeko(w->fp, base + (off_t)total, SEEK_SET) != 0) return w->failed = -1;
    w->count += count;
    return 0;
}

int dm_tck_close(dm_tck_writer *w, unsigned long long total_count)
{
    for (int a = 0; a < 3; a++) put_f32(w->fp, INFINITY);
    char num[64];
    snprintf(num, sizeof num, "%012ld\ntotal_count: %012llu", w->count, total_count);
    int bad = fseek(w->fp, w->count_at, SEEK_SET) != 0 ||
              fwrite(num, 1, strlen(num), w->fp) != strlen(num);
    int rc = dm_commit_written(w->fp, bad | w->failed, w->tmp, w->path);
    free(w->path);
    free(w->tmp);
    free(w);
    return rc;
}

long dm_tck_written(const dm_tck_writer *w)
{
    return w->count;
}

void dm_tck_abort(dm_tck_writer *w)
{
    if (!w) return;
    fclose(w->fp); /* a bare points file: its own path, removed as well */
    remove(w->tmp);
    free(w->path);
    free(w->tmp);
    free(w);
}

/* ---- reading ---- */

enum { TCK_F32LE, TCK_F32BE, TCK_F64LE, TCK_F64BE };

/* No header of a real file comes near this; a binary file given by mistake stops here. */
#define TCK_HEADER_MAX (1L << 20)

/* The header's fields the reader needs. */
typedef struct tck_header {
    long long offset; /* -1: no "file:" line */
    int datatype;     /* -1: no "datatype:" line */
    long count;       /* -1: no "count:" line */
    long long end;    /* the byte after the END line */
    char *properties;
} tck_header;

/* Drops trailing white space (the line's '\n', a '\r' of a file edited elsewhere). */
static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
}

static int parse_datatype(const char *path, const char *value, int *type)
{
    static const char *const names[] = {"Float32LE", "Float32BE", "Float64LE", "Float64BE"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(value, names[k])) {
            *type = k;
            return 0;
        }
    return dm_set_error("%s: unknown datatype '%s' (Float32LE, Float32BE, Float64LE or Float64BE)",
                        path, value);
}

/* One "key: value" line of the header into h. */
static int parse_header_line(const char *path, char *line, tck_header *h, size_t *props_len)
{
    char *colon = strchr(line, ':');
    if (!colon) return 0; /* MRtrix ignores lines without a key, and so do we */
    *colon = 0;
    const char *key = line, *value = colon + 1;
    while (*value == ' ' || *value == '\t') value++;
    if (!strcmp(key, "file")) {
        char dot[2];
        long long offset;
        int used = 0;
        if (sscanf(value, "%1s %lld%n", dot, &offset, &used) != 2 || strcmp(dot, ".") ||
            value[used] || offset < 0)
            return dm_set_error("%s: the header's 'file: %s' is not 'file: . OFFSET' (the data "
                                "must follow the header in the same file)",
                                path, value);
        h->offset = offset;
    } else if (!strcmp(key, "datatype")) {
        if (parse_datatype(path, value, &h->datatype) != 0) return -1;
    } else if (!strcmp(key, "count")) {
        char *end;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (end == value || *end || v < 0 || errno)
            return dm_set_error("%s: the header's count '%s' is not a whole number", path, value);
        h->count = v;
    }
    size_t n = strlen(key) + strlen(value) + 3;
    char *grown = realloc(h->properties, *props_len + n + 1);
    if (!grown) return dm_set_error("%s: out of memory reading the header", path);
    h->properties = grown;
    *props_len += (size_t)snprintf(grown + *props_len, n + 1, "%s: %s\n", key, value);
    return 0;
}

static int read_header(const char *path, FILE *fp, tck_header *h)
{
    h->offset = -1;
    h->datatype = -1;
    h->count = -1;
    h->properties = calloc(1, 1);
    size_t props_len = 0, cap = 0;
    char *line = NULL;
    int rc = 0, ended = 0;
    ssize_t len = getline(&line, &cap, fp);
    if (len < 0 || (chomp(line), strcmp(line, "mrtrix tracks")))
        rc = dm_set_error("%s: not an MRtrix tracks file (the first line is not 'mrtrix tracks')",
                          path);
    while (rc == 0 && !ended) {
        if (ftell(fp) > TCK_HEADER_MAX || (len = getline(&line, &cap, fp)) < 0) {
            rc = dm_set_error("%s: the header has no END line%s", path,
                              len < 0 ? "" : " in its first MiB");
            break;
        }
        if (memchr(line, 0, (size_t)len)) {
            rc = dm_set_error("%s: the header has no END line (binary data before it)", path);
            break;
        }
        chomp(line);
        if (!strcmp(line, "END"))
            ended = 1;
        else
            rc = parse_header_line(path, line, h, &props_len);
    }
    free(line);
    if (rc != 0) return -1;
    h->end = ftell(fp);
    if (h->datatype < 0) return dm_set_error("%s: the header has no datatype line", path);
    if (h->offset < 0) return dm_set_error("%s: the header has no 'file: . OFFSET' line", path);
    if (h->offset < h->end)
        return dm_set_error("%s: the data offset %lld lies inside the header (%lld bytes)", path,
                            h->offset, h->end);
    return 0;
}

/* The value k of the data (the file's type) as a float; *wide the double it was (a finite double
 * beyond float's range is an error: as a float it would read as the Inf that ends the file). */
static inline __attribute__((always_inline)) float tck_value(const unsigned char *raw, size_t k,
                                                             int type, double *wide)
{
    /* a plain load, its bytes swapped when the file's order is not the host's */
    const int swap = (type == TCK_F32BE || type == TCK_F64BE) == host_is_little_endian();
    float f;
    if (type == TCK_F32LE || type == TCK_F32BE) {
        uint32_t u;
        memcpy(&u, raw + 4 * k, 4);
        if (swap) u = __builtin_bswap32(u);
        memcpy(&f, &u, 4);
        *wide = f;
        return f;
    }
    uint64_t u;
    memcpy(&u, raw + 8 * k, 8);
    if (swap) u = __builtin_bswap64(u);
    memcpy(wide, &u, 8);
    return (float)*wide;
}

static int beyond_float(double d)
{
    return isfinite(d) && fabs(d) > FLT_MAX;
}

/* The data are scanned and copied in chunks of this many triplets, one chunk a task. */
#define TCK_CHUNK ((size_t)1 << 16)

/* What a chunk of triplets holds, up to the first Inf marker in it (if any). */
typedef struct tck_chunk {
    size_t end;  /* the chunk's end, or its Inf marker's triplet */
    size_t nans; /* NaN markers before end */
    int bad;     /* a point before end is not finite */
    int ended;   /* an Inf marker ends the chunk */
} tck_chunk;

static inline __attribute__((always_inline)) void scan_chunk_of(const unsigned char *raw, int type,
                                                                size_t a, size_t b, tck_chunk *c)
{
    *c = (tck_chunk){.end = b};
    double w;
    for (size_t i = a; i < b; i++) {
        float x = tck_value(raw, 3 * i, type, &w);
        if (isinf(x)) {
            c->end = i;
            c->ended = 1;
            return;
        }
        if (isnan(x)) {
            c->nans++;
        } else if (!isfinite(tck_value(raw, 3 * i + 1, type, &w)) ||
                   !isfinite(tck_value(raw, 3 * i + 2, type, &w))) {
            c->bad = 1;
        }
    }
}

/* Triplets [a, b) (no Inf marker among them) to their places: the points from point `out` on,
 * each NaN marker's streamline end into start[s + 1], s the streamlines before. */
static inline __attribute__((always_inline)) void copy_chunk_of(const unsigned char *raw, int type,
                                                                size_t a, size_t b, size_t s,
                                                                size_t out, float *xyz, long *start)
{
    double w;
    for (size_t i = a; i < b; i++) {
        float x = tck_value(raw, 3 * i, type, &w);
        if (isnan(x)) {
            start[++s] = (long)out;
            continue;
        }
        float *p = xyz + 3 * out++;
        p[0] = x;
        p[1] = tck_value(raw, 3 * i + 1, type, &w);
        p[2] = tck_value(raw, 3 * i + 2, type, &w);
    }
}

/* The two above with the type a constant in each case (the common Float32LE a plain load). */
static void scan_chunk(const unsigned char *raw, int type, size_t a, size_t b, tck_chunk *c)
{
    switch (type) {
    case TCK_F32LE: scan_chunk_of(raw, TCK_F32LE, a, b, c); break;
    case TCK_F32BE: scan_chunk_of(raw, TCK_F32BE, a, b, c); break;
    case TCK_F64LE: scan_chunk_of(raw, TCK_F64LE, a, b, c); break;
    default: scan_chunk_of(raw, TCK_F64BE, a, b, c); break;
    }
}

static void copy_chunk(const unsigned char *raw, int type, size_t a, size_t b, size_t s, size_t out,
                       float *xyz, long *start)
{
    switch (type) {
    case TCK_F32LE: copy_chunk_of(raw, TCK_F32LE, a, b, s, out, xyz, start); break;
    case TCK_F32BE: copy_chunk_of(raw, TCK_F32BE, a, b, s, out, xyz, start); break;
    case TCK_F64LE: copy_chunk_of(raw, TCK_F64LE, a, b, s, out, xyz, start); break;
    default: copy_chunk_of(raw, TCK_F64BE, a, b, s, out, xyz, start); break;
    }
}

/* The message of the first point that is not finite (the data hold one before end): its
 * streamline and place, found by walking the data from the start. */
static int bad_point_error(const char *path, const unsigned char *raw, int type, size_t end)
{
    long count = 0, kept = 0, first = 0;
    double w;
    for (size_t i = 0; i < end; i++) {
        float p[3];
        for (int k = 0; k < 3; k++) p[k] = tck_value(raw, 3 * i + k, type, &w);
        if (isnan(p[0])) {
            count++;
            first = kept;
        } else if (!isfinite(p[1]) || !isfinite(p[2])) {
            return dm_set_error("%s: streamline %ld, point %ld is not finite (%g %g %g)", path,
                                count + 1, kept - first + 1, p[0], p[1], p[2]);
        } else {
            kept++;
        }
    }
    return dm_set_error("%s: a point is not finite", path);
}

/* The raw data bytes (n_triplets whole triplets at the data offset): the file mapped (*map,
 * *map_len to unmap), or, where it cannot be, read into a malloc'd *copy.  NULL with the error
 * set. */
static const unsigned char *data_bytes(const char *path, FILE *fp, const tck_header *h,
                                       size_t bytes, void **map, size_t *map_len,
                                       unsigned char **copy)
{
    *map = NULL;
    *copy = NULL;
    size_t len = (size_t)h->offset + bytes;
    void *m = bytes ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fileno(fp), 0) : MAP_FAILED;
    if (m != MAP_FAILED) {
        madvise(m, len, MADV_SEQUENTIAL);
        *map = m;
        *map_len = len;
        return (const unsigned char *)m + h->offset;
    }
    *copy = malloc(bytes ? bytes : 1);
    if (!*copy) {
        dm_set_error("%s: out of memory", path);
        return NULL;
    }
    if (fseeko(fp, (off_t)h->offset, SEEK_SET) != 0) {
        dm_set_error("%s: cannot seek to the data at byte %lld", path, h->offset);
        return NULL;
    }
    for (size_t done = 0; done < bytes;) {
        if (dm_stop_requested()) {
            dm_stop_error();
            return NULL;
        }
        size_t n = bytes - done < ((size_t)1 << 22) ? bytes - done : ((size_t)1 << 22);
        if (fread(*copy + done, 1, n, fp) != n) {
            dm_set_error("%s: cannot read the streamline data", path);
            return NULL;
        }
        done += n;
    }
    return *copy;
}

/* The triplets split at the NaN markers up to the first Inf marker, in parallel: each chunk
 * scanned (markers counted, points checked), then its points copied to their place.  Fills t;
 * *ended tells whether the Inf was met, *open_points how many points follow the last NaN. */
static int split_data(const char *path, const unsigned char *raw, int type, size_t n_triplets,
                      int threads, dm_tck *t, int *ended, long *open_points)
{
    const size_t nchunks = (n_triplets + TCK_CHUNK - 1) / TCK_CHUNK;
    tck_chunk *c = malloc((nchunks ? nchunks : 1) * sizeof *c);
    if (!c) return dm_set_error("%s: out of memory", path);
    int wide_bad = 0, stop = 0;
    const int wide = type == TCK_F64LE || type == TCK_F64BE;
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads) reduction(| : wide_bad, stop)
    for (size_t k = 0; k < nchunks; k++) {
        const size_t a = k * TCK_CHUNK, b = a + TCK_CHUNK < n_triplets ? a + TCK_CHUNK : n_triplets;
        if (dm_stop_requested()) {
            stop = 1;
            continue;
        }
        double w;
        for (size_t i = 3 * a; wide && i < 3 * b; i++) /* every value, the Inf's after too */
            if (tck_value(raw, i, type, &w), beyond_float(w)) wide_bad = 1;
        scan_chunk(raw, type, a, b, &c[k]);
    }
    if (stop) {
        free(c);
        return dm_stop_error();
    }
    if (wide_bad) { /* the first such value, as a reader going through the file meets it */
        double w = 0;
        for (size_t i = 0; i < 3 * n_triplets; i++)
            if (tck_value(raw, i, type, &w), beyond_float(w)) break;
        free(c);
        return dm_set_error("%s: coordinate %g is beyond single precision", path, w);
    }
    /* the chunks before the first Inf marker; their streamlines and points before each */
    size_t used = 0, end = n_triplets;
    *ended = 0;
    int bad = 0;
    while (used < nchunks) {
        bad |= c[used].bad;
        if (c[used++].ended) {
            *ended = 1;
            end = c[used - 1].end;
            break;
        }
    }
    if (bad) {
        free(c);
        return bad_point_error(path, raw, type, end);
    }
    size_t *nan_base = malloc((used + 1) * sizeof *nan_base);
    if (!nan_base) {
        free(c);
        return dm_set_error("%s: out of memory", path);
    }
    nan_base[0] = 0;
    for (size_t k = 0; k < used; k++) nan_base[k + 1] = nan_base[k] + c[k].nans;
    const long count = (long)nan_base[used];
    const size_t kept = end - (size_t)count;
    t->count = count;
    t->npoints = malloc((size_t)(count ? count : 1) * sizeof *t->npoints);
    t->start = malloc((size_t)(count + 1) * sizeof *t->start);
    t->xyz = dm_big_alloc((kept ? kept : 1) * 3 * sizeof(float));
    if (!t->npoints || !t->start || !t->xyz) {
        free(c);
        free(nan_base);
        return dm_set_error("%s: out of memory for %zu points", path, kept);
    }
    t->start[0] = 0;
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
    for (size_t k = 0; k < used; k++) {
        const size_t a = k * TCK_CHUNK, b = k + 1 == used ? end : a + TCK_CHUNK;
        copy_chunk(raw, type, a, b, nan_base[k], a - nan_base[k], t->xyz, t->start);
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long s = 0; s < count; s++) t->npoints[s] = t->start[s + 1] - t->start[s];
    *open_points = (long)(kept - (size_t)t->start[count]);
    free(c);
    free(nan_base);
    return 0;
}

int dm_tck_read_threads(const char *path, dm_tck *t, int threads)
{
    memset(t, 0, sizeof *t);
    t->header_count = -1;
#ifdef _OPENMP
    if (threads <= 0) threads = omp_get_max_threads();
#else
    if (threads <= 0) threads = 1; /* a build without OpenMP (the fuzz targets) */
#endif
    FILE *fp = fopen(path, "rb");
    if (!fp) return dm_set_error("cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || S_ISDIR(st.st_mode)) {
        fclose(fp);
        return dm_set_error("%s: a folder, not an MRtrix tracks file", path);
    }
    tck_header h;
    int rc = read_header(path, fp, &h);
    long long size = (long long)st.st_size;
    if (rc == 0 && h.offset > size)
        rc = dm_set_error("%s: truncated: the data start at byte %lld but the file has %lld bytes",
                          path, h.offset, size);
    size_t triplet_bytes = h.datatype >= TCK_F64LE ? 24 : 12;
    size_t n_triplets = rc == 0 ? (size_t)(size - h.offset) / triplet_bytes : 0;
    size_t extra = rc == 0 ? (size_t)(size - h.offset) % triplet_bytes : 0;
    void *map = NULL;
    size_t map_len = 0;
    unsigned char *copy = NULL;
    const unsigned char *raw =
        rc == 0 ? data_bytes(path, fp, &h, n_triplets * triplet_bytes, &map, &map_len, &copy)
                : NULL;
    if (rc == 0 && !raw) rc = -1;
    int ended = 0;
    long open_points = 0;
    if (rc == 0)
        rc = split_data(path, raw, h.datatype, n_triplets, threads, t, &ended, &open_points);
    if (map) munmap(map, map_len);
    free(copy);
    fclose(fp);
    if (rc == 0 && !ended) {
        /* No Inf marker: whole only when the last streamline ended and the count agrees. */
        if (extra)
            rc = dm_set_error("%s: truncated: the data end inside a point (%zu bytes after the "
                              "last whole one) with no end-of-file marker",
                              path, extra);
        else if (open_points)
            rc = dm_set_error("%s: truncated: the last streamline (%ld points) has no end marker "
                              "and the file no end-of-file marker",
                              path, open_points);
        else if (h.count < 0)
            rc = dm_set_error("%s: no end-of-file marker and no count in the header to show that "
                              "the file is whole (%ld streamlines found)",
                              path, t->count);
    }
    if (rc == 0 && h.count >= 0 && h.count != t->count)
        rc = dm_set_error("%s: the header's count is %ld but the file holds %ld streamlines%s",
                          path, h.count, t->count, ended ? "" : " (no end-of-file marker)");
    if (rc != 0) {
        free(h.properties);
        dm_tck_free(t);
        t->header_count = -1;
        return -1;
    }
    t->header_count = h.count;
    t->properties = h.properties;
    return 0;
}

int dm_tck_read(const char *path, dm_tck *t)
{
    return dm_tck_read_threads(path, t, 0);
}

char *dm_tck_property(const dm_tck *t, const char *key)
{
    size_t n = strlen(key);
    for (const char *line = t->properties; line && *line;) {
        size_t len = strcspn(line, "\n");
        if (len > n + 1 && !strncmp(line, key, n) && line[n] == ':') {
            const char *value = line + n + 1;
            while (*value == ' ') value++;
            return strndup(value, (size_t)(line + len - value));
        }
        line += len + (line[len] == '\n');
    }
    return NULL;
}

void dm_tck_free(dm_tck *t)
{
    if (!t) return;
    free(t->xyz);
    free(t->npoints);
    free(t->start);
    free(t->properties);
    for (int k = 0; k < t->ndps; k++) {
        free(t->dps[k].name);
        free(t->dps[k].values);
    }
    free(t->dps);
    for (int k = 0; k < t->ngroups; k++) {
        free(t->groups[k].name);
        free(t->groups[k].index);
    }
    free(t->groups);
    memset(t, 0, sizeof *t);
}

const dm_tract_values *dm_tck_dps(const dm_tck *t, const char *name)
{
    for (int k = 0; k < t->ndps; k++)
        if (!strcmp(t->dps[k].name, name)) return &t->dps[k];
    return NULL;
}

/* ---- per-streamline weights ---- */

/* A weights file's separators: white space and ','. */
static int weight_separator(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == ',';
}

/* One value of a weights file (the token text[0..len), followed by a separator, '#' or the
 * file's closing NUL; on line `line`, value number `k` from 1) as a float; -1 with the message
 * when it is not a number, negative or not finite. */
static int parse_weight(const char *path, const char *text, size_t len, long line, long k,
                        float *out)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 32 || (unsigned char)text[i] > 126)
            /* binary bytes (a compressed file, say) would break the one line of the message */
            return dm_set_error("%s: line %ld: weight %ld is not a number (binary data: not a "
                                "text file of weights)",
                                path, line, k);
    int shown = len > 40 ? 40 : (int)len; /* of the token, in messages */
    const char *more = len > 40 ? "..." : "";
    char *end;
    double v = strtod(text, &end); /* stops at the separator after the token at the latest */
    if (end != text + len)
        return dm_set_error("%s: line %ld: weight %ld '%.*s%s' is not a number", path, line, k,
                            shown, text, more);
    if (!isfinite(v))
        return dm_set_error("%s: line %ld: weight %ld '%.*s%s' is not finite", path, line, k, shown,
                            text, more);
    if (v < 0)
        return dm_set_error("%s: line %ld: weight %ld '%.*s%s' is negative (weights are >= 0)",
                            path, line, k, shown, text, more);
    if (v > FLT_MAX)
        return dm_set_error("%s: line %ld: weight %ld '%.*s%s' is beyond single precision", path,
                            line, k, shown, text, more);
    *out = (float)v;
    return 0;
}

int dm_tck_values_read(const char *path, float **values, long *n)
{
    *values = NULL;
    *n = 0;
    FILE *probe = fopen(path, "rb");
    if (!probe) return dm_set_error("cannot read the weights file %s: %s", path, strerror(errno));
    struct stat st;
    int folder = fstat(fileno(probe), &st) == 0 && S_ISDIR(st.st_mode);
    fclose(probe);
    if (folder) return dm_set_error("cannot read the weights file %s: it is a folder", path);
    size_t len = 0;
    char *text = dm_read_file(path, &len); /* its error names the file */
    if (!text) return -1;
    float *w = NULL;
    long count = 0, cap = 0, line = 1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < len;) {
        char c = text[i];
        if (c == '\n') line++;
        if (weight_separator(c)) {
            i++;
        } else if (c == '#') { /* a comment, to the end of the line */
            while (i < len && text[i] != '\n') i++;
        } else {
            size_t j = i;
            while (j < len && !weight_separator(text[j]) && text[j] != '#') j++;
            float v = 0;
            rc = parse_weight(path, text + i, j - i, line, count + 1, &v);
            if (rc == 0 && count == cap) {
                cap = cap ? 2 * cap : 4096;
                float *grown = realloc(w, (size_t)cap * sizeof *w);
                if (!grown) rc = dm_set_error("%s: out of memory for %ld weights", path, cap);
                w = grown ? grown : w;
            }
            if (rc == 0) w[count++] = v;
            i = j;
        }
    }
    free(text);
    if (rc != 0) {
        free(w);
        return -1;
    }
    *values = w;
    *n = count;
    return 0;
}

int dm_tck_weights_read(const char *path, long count, const char *tck_path, float **weights)
{
    long n;
    if (dm_tck_values_read(path, weights, &n) != 0) return -1;
    if (n == count) return 0;
    free(*weights);
    *weights = NULL;
    return dm_set_error("%s: %ld weight%s, but %s holds %ld streamline%s (one weight per "
                        "streamline, in its order)",
                        path, n, n == 1 ? "" : "s", tck_path, count, count == 1 ? "" : "s");
}

int dm_tck_weights_write(const char *path, const float *weights, long count)
{
    FILE *f = fopen(path, "w");
    if (!f) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    for (long i = 0; i < count; i++) {
        if (weights)
            fprintf(f, "%.9g\n", (double)weights[i]);
        else
            fputs("1\n", f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return dm_set_error("cannot write %s: %s", path, strerror(errno));
    return 0;
}
