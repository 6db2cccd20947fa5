/* gzip members of 1 MiB marked with their sizes (gz_blocks.h). */
#include "io/gz_blocks.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum {
    BLOCK = 1 << 20,    /* uncompressed bytes per member */
    HEAD = 10 + 2 + 12, /* fixed header, XLEN, the "Dm" subfield (4 + 8 bytes) */
    TAIL = 8,           /* CRC32, ISIZE */
};

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One member: header with the sizes, raw deflate, trailer.  Returns its length, 0 on failure. */
static size_t pack_member(const unsigned char *in, size_t n, int level, unsigned char *out,
                          size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    z.next_out = out + HEAD;
    z.avail_out = (uInt)(cap - HEAD - TAIL);
    int ok = deflate(&z, Z_FINISH) == Z_STREAM_END;
    size_t body = z.total_out;
    deflateEnd(&z);
    if (!ok) return 0;
    static const unsigned char fixed[12] = {0x1f, 0x8b, 8, 4 /* FEXTRA */, 0, 0, 0, 0, 0,
                                            255,  12,   0 /* XLEN */};
    memcpy(out, fixed, sizeof fixed);
    out[12] = 'D';
    out[13] = 'm';
    out[14] = 8;
    out[15] = 0;
    size_t total = HEAD + body + TAIL;
    put32(out + 16, (uint32_t)total);
    put32(out + 20, (uint32_t)n);
    put32(out + HEAD + body, (uint32_t)crc32(0L, in, (uInt)n));
    put32(out + HEAD + body + 4, (uint32_t)n);
    return total;
}

int dm_gz_write_blocks(FILE *f, const void *data, size_t len, int level)
{
    size_t nblocks = len ? (len + BLOCK - 1) / BLOCK : 1;
    size_t cap = HEAD + TAIL + compressBound(BLOCK);
    int failed = 0;
    /* rounds of as many blocks as threads x 4, so that memory stays bounded */
    enum { ROUND = 64 };
    unsigned char *buf = malloc(ROUND * cap);
    size_t len_of[ROUND];
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t b0 = 0; b0 < nblocks && !failed; b0 += ROUND) {
        size_t nb = nblocks - b0 < ROUND ? nblocks - b0 : ROUND;
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t i = 0; i < nb; i++) {
            size_t at = (b0 + i) * BLOCK, n = len - at < BLOCK ? len - at : BLOCK;
            len_of[i] = pack_member((const unsigned char *)data + at, len ? n : 0, level,
                                    buf + i * cap, cap);
        }
        for (size_t i = 0; i < nb && !failed; i++) {
            if (!len_of[i]) {
                errno = ENOMEM;
                failed = 1;
            } else if (fwrite(buf + i * cap, 1, len_of[i], f) != len_of[i]) {
                failed = 1;
            }
        }
    }
    free(buf);
    return failed ? -1 : 0;
}

int dm_gz_is_blocked(const unsigned char *p, size_t n)
{
    return n >= HEAD && p[0] == 0x1f && p[1] == 0x8b && p[2] == 8 && p[3] == 4 && p[10] == 12 &&
           p[11] == 0 && p[12] == 'D' && p[13] == 'm' && p[14] == 8 && p[15] == 0;
}

static int unpack_member(const unsigned char *m, size_t mlen, unsigned char *out, size_t n,
                         size_t want)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -15) != Z_OK) return -1;
    unsigned char *tmp = want < n ? malloc(n) : NULL;
    z.next_in = (unsigned char *)m + HEAD;
    z.avail_in = (uInt)(mlen - HEAD - TAIL);
    z.next_out = tmp ? tmp : out;
    z.avail_out = (uInt)n;
    int ok = (want == n || tmp) && inflate(&z, Z_FINISH) == Z_STREAM_END && z.total_out == n;
    inflateEnd(&z);
    ok = ok && crc32(0L, tmp ? tmp : out, (uInt)n) == get32(m + mlen - TAIL);
    if (ok && tmp) memcpy(out, tmp, want);
    free(tmp);
    return ok ? 0 : -1;
}

int dm_gz_read_blocks(const unsigned char *gz, size_t gz_len, unsigned char *out, size_t out_len)
{
    /* the members' places first (a walk over their headers), then the inflating in parallel */
    size_t cap = 64, count = 0, have = 0, at = 0;
    size_t *pos = malloc(cap * sizeof *pos), *dst = malloc(cap * sizeof *dst);
    int bad = !pos || !dst;
    while (!bad && have < out_len) {
        if (gz_len - at < HEAD + TAIL || !dm_gz_is_blocked(gz + at, gz_len - at)) {
            bad = 1;
            break;
        }
        size_t mlen = get32(gz + at + 16), n = get32(gz + at + 20);
        if (mlen < HEAD + TAIL || mlen > gz_len - at || n > BLOCK ||
            get32(gz + at + mlen - 4) != n) {
            bad = 1;
            break;
        }
        if (count == cap) {
            cap *= 2;
            pos = realloc(pos, cap * sizeof *pos);
            dst = realloc(dst, cap * sizeof *dst);
            if (!pos || !dst) {
                bad = 1;
                break;
            }
        }
        pos[count] = at;
        dst[count++] = have;
        have += n;
        at += mlen;
        if (n == 0 && have < out_len) bad = 1; /* an empty member ends the data */
    }
    size_t todo = bad ? 0 : count;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < todo; i++) {
        const unsigned char *m = gz + pos[i];
        size_t n = get32(m + 20), want = out_len - dst[i] < n ? out_len - dst[i] : n;
        if (unpack_member(m, get32(m + 16), out + dst[i], n, want) != 0) {
#pragma omp atomic write
            bad = 1;
        }
    }
    free(pos);
    free(dst);
    return bad ? -1 : 0;
}
