/* gzip members of 1 MiB marked with their sizes, and whole-buffer inflating (gz_blocks.h). */
#include "io/gz_blocks.h"

#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Each member is deflated by ISA-L at level 0 with Huffman codes made for that member from a
 * histogram of a sample of it (ISA-L's "semi-dynamic" compression: 1/8 of the member in 16 KiB
 * pieces; every symbol gets a code, so the pieces left out are coded too).  Not at ISA-L's
 * level 1: in ISA-L 2.30 (Debian 12) level 1's matches depend on the address of the stream
 * state (measured: 4 of 20,000 placements of it gave other, valid bytes for the same data),
 * so the same image gave another file now and then.  At level 0 with the member's own codes
 * the bytes are a function of the member's bytes alone; the files are level 1's size (within
 * 1%), compressed at 0.55-1.04 times its speed (docs/performance.md, bench/bench_gz.c). */
enum { SAMPLE_PIECE = 16 << 10, SAMPLE_EVERY = 8 };

struct dm_gz_packer {
    struct isal_zstream z;
    struct isal_hufftables codes;
    struct isal_huff_histogram hist;
};

size_t dm_gz_packer_bytes(void)
{
    return sizeof(struct dm_gz_packer);
}

size_t dm_gz_member_bound(size_t n)
{
    return HEAD + TAIL + n + n / 8 + 1024; /* above deflate's bound, stored blocks included */
}

size_t dm_gz_pack_member(dm_gz_packer *p, const unsigned char *in, size_t n, unsigned char *out,
                         size_t cap)
{
    if (n > BLOCK || cap < HEAD + TAIL) return 0;
    memset(&p->hist, 0, sizeof p->hist);
    for (size_t at = 0; at < n; at += (size_t)SAMPLE_PIECE * SAMPLE_EVERY)
        isal_update_histogram((uint8_t *)in + at,
                              (int)(n - at < SAMPLE_PIECE ? n - at : SAMPLE_PIECE), &p->hist);
    if (isal_create_hufftables(&p->codes, &p->hist) != 0) return 0;
    struct isal_zstream *z = &p->z;
    memset(z, 0, sizeof *z); /* nothing of the member before (its hash table) kept */
    isal_deflate_stateless_init(z);
    z->level = 0;
    z->hufftables = &p->codes;
    z->gzip_flag = IGZIP_GZIP_NO_HDR;
    z->flush = NO_FLUSH;
    z->end_of_stream = 1;
    z->next_in = (uint8_t *)in;
    z->avail_in = (uint32_t)n;
    z->next_out = out + HEAD;
    z->avail_out = (uint32_t)(cap - HEAD);
    if (isal_deflate_stateless(z) != COMP_OK) return 0;
    static const unsigned char fixed[16] = {0x1f, 0x8b, 8,  4 /* FEXTRA */, 0,   0,   0, 0,
                                            0,    255,  12, 0 /* XLEN */,   'D', 'm', 8, 0};
    memcpy(out, fixed, sizeof fixed);
    size_t total = HEAD + z->total_out; /* the trailer included (CRC32 and ISIZE) */
    put32(out + 16, (uint32_t)total);
    put32(out + 20, (uint32_t)n);
    return total;
}

/* A thread's means of making members: its packer, the member's output, and
 * (dm_gz_write_filled) the buffer its bytes are made into. */
typedef struct member_maker {
    dm_gz_packer packer;
    unsigned char *out, *made;
    size_t cap;
} member_maker;

static void maker_free(member_maker *m)
{
    if (!m) return;
    free(m->out);
    free(m->made);
    free(m);
}

/* NULL when out of memory. */
static member_maker *maker_new(int filled)
{
    member_maker *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = dm_gz_member_bound(BLOCK);
    m->out = malloc(m->cap);
    m->made = filled ? malloc(BLOCK) : NULL;
    if (!m->out || (filled && !m->made)) {
        maker_free(m);
        return NULL;
    }
    return m;
}

/* The members of data[0..len), or of what fill makes (data NULL): compressed on all cores,
 * each written as soon as it and the ones before it are done, so that the writing of the file
 * (one thread at a time, in order) overlaps the compressing of the members after it. */
static int write_members(FILE *f, const unsigned char *data, size_t len, dm_gz_fill fill, void *ctx)
{
    size_t nblocks = len ? (len + BLOCK - 1) / BLOCK : 1;
    int failed = 0, err = 0;
#pragma omp parallel if (nblocks > 1) /* one block: no team to wake (a small map's write) */
    {
        member_maker *m = maker_new(fill != NULL);
#pragma omp for ordered schedule(dynamic, 1)
        for (size_t i = 0; i < nblocks; i++) {
            size_t at = i * BLOCK, n = len - at < BLOCK ? len - at : BLOCK, got = 0;
            int stop;
#pragma omp atomic read
            stop = failed;
            if (!stop && m) {
                const unsigned char *in = data ? data + at : m->made;
                if (fill && n) fill(ctx, at, n, m->made);
                got = dm_gz_pack_member(&m->packer, in, n, m->out, m->cap);
            }
#pragma omp ordered
            {
                int e = 0;
#pragma omp atomic read
                stop = failed;
                if (stop)
                    ;
                else if (!got)
                    e = ENOMEM;
                else if (fwrite(m->out, 1, got, f) != got)
                    e = errno ? errno : EIO;
                if (e) {
                    err = e;
#pragma omp atomic write
                    failed = 1;
                }
            }
        }
        maker_free(m);
    }
    if (failed) errno = err;
    return failed ? -1 : 0;
}

int dm_gz_write_blocks(FILE *f, const void *data, size_t len)
{
    return write_members(f, data, len, NULL, NULL);
}

int dm_gz_write_filled(FILE *f, size_t len, dm_gz_fill fill, void *ctx)
{
    return write_members(f, NULL, len, fill, ctx);
}

int dm_gz_is_blocked(const unsigned char *p, size_t n)
{
    return n >= HEAD && p[0] == 0x1f && p[1] == 0x8b && p[2] == 8 && p[3] == 4 && p[10] == 12 &&
           p[11] == 0 && p[12] == 'D' && p[13] == 'm' && p[14] == 8 && p[15] == 0;
}

/* A member's n bytes; the first `want` of them into out (a scratch copy when want < n). */
static int unpack_member(struct libdeflate_decompressor *d, const unsigned char *m, size_t mlen,
                         unsigned char *out, size_t n, size_t want)
{
    unsigned char *tmp = want < n ? malloc(n) : NULL;
    unsigned char *to = tmp ? tmp : out;
    int ok = (want == n || tmp) &&
             libdeflate_deflate_decompress(d, m + HEAD, mlen - HEAD - TAIL, to, n, NULL) ==
                 LIBDEFLATE_SUCCESS &&
             libdeflate_crc32(0, to, n) == get32(m + mlen - TAIL);
    if (ok && tmp) memcpy(out, tmp, want);
    free(tmp);
    return ok ? 0 : -1;
}

static int inflate_blocked(const unsigned char *gz, size_t gz_len, unsigned char *out,
                           size_t out_len)
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
            get32(gz + at + mlen - 4) != n || (n == 0 && have < out_len)) {
            bad = 1;
            break;
        }
        if (count == cap) {
            cap *= 2;
            size_t *p2 = realloc(pos, cap * sizeof *pos), *d2 = realloc(dst, cap * sizeof *dst);
            if (p2) pos = p2;
            if (d2) dst = d2;
            if (!p2 || !d2) {
                bad = 1;
                break;
            }
        }
        pos[count] = at;
        dst[count++] = have;
        have += n;
        at += mlen;
    }
    size_t todo = bad ? 0 : count;
#pragma omp parallel if (todo > 1)
    {
        struct libdeflate_decompressor *d = todo ? libdeflate_alloc_decompressor() : NULL;
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < todo; i++) {
            const unsigned char *m = gz + pos[i];
            size_t n = get32(m + 20), want = out_len - dst[i] < n ? out_len - dst[i] : n;
            if (!d || unpack_member(d, m, get32(m + 16), out + dst[i], n, want) != 0) {
#pragma omp atomic write
                bad = 1;
            }
        }
        libdeflate_free_decompressor(d);
    }
    free(pos);
    free(dst);
    return bad ? -1 : 0;
}

/* Any gzip file, member after member, until out_len bytes are out.  libdeflate inflates whole
 * members only: a member that holds more than is wanted goes through a scratch buffer as large
 * as its ISIZE says. */
static int inflate_members(const unsigned char *gz, size_t gz_len, unsigned char *out,
                           size_t out_len)
{
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    size_t have = 0, at = 0;
    int rc = d ? 0 : -1;
    while (rc == 0 && have < out_len) {
        if (gz_len - at < 18) {
            rc = -1;
            break;
        }
        size_t in_used = 0, got = 0, room = out_len - have;
        uint32_t isize = get32(gz + gz_len - 4); /* the last member's; a hint only */
        enum libdeflate_result r = libdeflate_gzip_decompress_ex(d, gz + at, gz_len - at,
                                                                 out + have, room, &in_used, &got);
        if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
            /* the member holds more than is wanted: into scratch, keep the wanted part */
            size_t big = room + (isize > room ? isize : room) + BLOCK;
            for (int tries = 0; tries < 6 && r == LIBDEFLATE_INSUFFICIENT_SPACE; tries++) {
                unsigned char *tmp = malloc(big);
                if (!tmp) break;
                r = libdeflate_gzip_decompress_ex(d, gz + at, gz_len - at, tmp, big, &in_used,
                                                  &got);
                if (r == LIBDEFLATE_SUCCESS) memcpy(out + have, tmp, got < room ? got : room);
                free(tmp);
                big *= 4;
            }
            if (r == LIBDEFLATE_SUCCESS && got > room) got = room;
        }
        if (r != LIBDEFLATE_SUCCESS || in_used == 0) {
            rc = -1;
            break;
        }
        have += got;
        at += in_used;
    }
    libdeflate_free_decompressor(d);
    return rc;
}

int dm_gz_inflate(const unsigned char *gz, size_t gz_len, unsigned char *out, size_t out_len)
{
    if (dm_gz_is_blocked(gz, gz_len)) return inflate_blocked(gz, gz_len, out, out_len);
    return inflate_members(gz, gz_len, out, out_len);
}
