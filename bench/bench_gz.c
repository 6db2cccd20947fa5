/* The .nii.gz writer's deflate (runtime/io/gz_blocks.h: each 1 MiB member with Huffman codes of
 * its own, ISA-L level 0) on one core, against the deflates a researcher's tools use on the
 * same members: ISA-L's level 1 (dimoc's writer before; its bytes depend on where its stream
 * state lies in memory), libdeflate's level 1 and zlib's level 1 (niftilib, FSL, MRtrix).
 * For each image given: MB/s of uncompressed bytes, the compressed size over the raw size, and
 * dimoc's speed over each peer's.  Not a test.  Build and run:
 *   make && cc -O2 -fopenmp -Iruntime -I/usr/include/nifti -o /tmp/bench_gz bench/bench_gz.c -Lbuild -ldimoc-runtime \
 *       -lnifti2 -lznz -l:libdeflate.a -lisal -lz -lm && /tmp/bench_gz IMAGE.nii.gz ... */
#include "io/gz_blocks.h"
#include "io/volume.h"

#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <zlib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MEMBER = 1 << 20, PEERS = 4 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Each deflate: one member in[0..n) into out[0..cap), its compressed length (0: failed). */
typedef struct {
    const char *name;
    size_t (*pack)(void *state, const unsigned char *in, size_t n, unsigned char *out, size_t cap);
} deflater;

static size_t pack_dimoc(void *state, const unsigned char *in, size_t n, unsigned char *out,
                         size_t cap)
{
    return dm_gz_pack_member(state, in, n, out, cap);
}

static size_t pack_isal1(void *state, const unsigned char *in, size_t n, unsigned char *out,
                         size_t cap)
{
    struct isal_zstream z;
    memset(state, 0, ISAL_DEF_LVL1_DEFAULT);
    isal_deflate_stateless_init(&z);
    z.level = 1;
    z.level_buf = state;
    z.level_buf_size = ISAL_DEF_LVL1_DEFAULT;
    z.gzip_flag = IGZIP_GZIP_NO_HDR;
    z.end_of_stream = 1;
    z.next_in = (uint8_t *)in;
    z.avail_in = (uint32_t)n;
    z.next_out = out;
    z.avail_out = (uint32_t)cap;
    return isal_deflate_stateless(&z) == COMP_OK ? z.total_out : 0;
}

static size_t pack_libdeflate1(void *state, const unsigned char *in, size_t n, unsigned char *out,
                               size_t cap)
{
    return libdeflate_gzip_compress(state, in, n, out, cap);
}

static size_t pack_zlib1(void *state, const unsigned char *in, size_t n, unsigned char *out,
                         size_t cap)
{
    (void)state;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    size_t len = rc == Z_STREAM_END ? z.total_out : 0;
    deflateEnd(&z);
    return len;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gz IMAGE.nii[.gz] ...\n");
        return 2;
    }
    const deflater peers[PEERS] = {{"dimoc (ISA-L level 0, the member's codes)", pack_dimoc},
                                   {"ISA-L level 1", pack_isal1},
                                   {"libdeflate level 1", pack_libdeflate1},
                                   {"zlib level 1", pack_zlib1}};
    void *state[PEERS] = {malloc(dm_gz_packer_bytes()), malloc(ISAL_DEF_LVL1_DEFAULT),
                          libdeflate_alloc_compressor(1), NULL};
    const size_t cap = dm_gz_member_bound(MEMBER) + 65536;
    unsigned char *out = malloc(cap);
    for (int a = 1; a < argc; a++) {
        dm_volume_bytes vb; /* the image's bytes as its file holds them: header, then values */
        if (dm_volume_bytes_read(argv[a], &vb) != 0) {
            fprintf(stderr, "bench_gz: %s: cannot read\n", argv[a]);
            return 1;
        }
        const unsigned char *img = vb.header;
        const size_t n = vb.header_len + vb.nvox * vb.nt * (size_t)vb.bytes_per;
        printf("\n%s: %.1f MB in %zu members of 1 MiB, one core\n\n", argv[a], n / 1e6,
               (n + MEMBER - 1) / MEMBER);
        printf("| deflate | MB/s | size / raw | dimoc's speed over it |\n|---|---|---|---|\n");
        double mbs[PEERS];
        for (int p = 0; p < PEERS; p++) {
            size_t packed = 0;
            int reps = 0;
            double t0 = now(), t;
            do { /* whole passes over the image, at least 0.5 s of them */
                packed = 0;
                for (size_t at = 0; at < n; at += MEMBER) {
                    size_t len = peers[p].pack(state[p], img + at,
                                               n - at < MEMBER ? n - at : MEMBER, out, cap);
                    if (!len) {
                        fprintf(stderr, "bench_gz: %s failed\n", peers[p].name);
                        return 1;
                    }
                    packed += len;
                }
                reps++;
                t = now() - t0;
            } while (t < 0.5);
            mbs[p] = n * (double)reps / t / 1e6;
            printf("| %s | %.0f | %.3f | %.2f |\n", peers[p].name, mbs[p], (double)packed / n,
                   mbs[0] / mbs[p]);
        }
        dm_volume_bytes_free(&vb);
    }
    free(state[0]);
    free(state[1]);
    libdeflate_free_compressor(state[2]);
    free(out);
    return 0;
}
