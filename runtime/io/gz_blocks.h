/* gzip files in independent blocks, compressed and inflated on all cores, and any gzip file
 * inflated whole.  Compressed by Intel's ISA-L (igzip, each member with Huffman codes of its
 * own: 4.3-4.8 times libdeflate's fastest level on float maps, to within 1% of its size),
 * inflated by libdeflate (whole-buffer DEFLATE, about twice zlib's speed).
 *
 * A .nii.gz written by dimoc is a gzip file of several members (RFC 1952 allows any number;
 * zlib's gzread, niftilib, nibabel, MRtrix and FSL read them as one stream), each holding 1 MiB
 * of the image and an extra field "Dm" with the member's compressed and uncompressed sizes.
 * The sizes let a reader find every member without inflating the ones before it, so that
 * reading, like writing, is split over threads.  The blocks depend only on byte offsets, and
 * each member's bytes only on its data (never on the thread count or on where in memory it was
 * compressed): the same image gives the same file. */
#ifndef DIMOC_GZ_BLOCKS_H
#define DIMOC_GZ_BLOCKS_H

#include <stddef.h>
#include <stdio.h>

/* Writes len bytes of data to f as marked members.  0 or -1 (errno set by the failed write, or
 * ENOMEM). */
int dm_gz_write_blocks(FILE *f, const void *data, size_t len);

/* The bytes [offset, offset + n) of a stream that is made as it is written, into out (a
 * member's worth at most, on the compressing thread). */
typedef void (*dm_gz_fill)(void *ctx, size_t offset, size_t n, unsigned char *out);

/* The same file as dm_gz_write_blocks of the len bytes that fill makes, without them all in
 * memory at once: each member's bytes are made into a buffer of the thread that compresses
 * them (a map converted to float32 block by block, while the block is in cache). */
int dm_gz_write_filled(FILE *f, size_t len, dm_gz_fill fill, void *ctx);

/* One marked member of in[0..n) (n <= 1 MiB) into out[0..cap): its length, 0 when it does not
 * fit.  A packer is one thread's working memory (dm_gz_packer_bytes() of it, any alignment of
 * malloc); dm_gz_member_bound(n) bytes of out always suffice. */
typedef struct dm_gz_packer dm_gz_packer;
size_t dm_gz_packer_bytes(void);
size_t dm_gz_member_bound(size_t n);
size_t dm_gz_pack_member(dm_gz_packer *p, const unsigned char *in, size_t n, unsigned char *out,
                         size_t cap);

/* 1 when the n bytes at buf begin with a marked member (a file dm_gz_write_blocks wrote). */
int dm_gz_is_blocked(const unsigned char *buf, size_t n);

/* Inflates the gzip file gz[0..gz_len) into out[0..out_len): out_len bytes from the start of
 * its uncompressed stream (the rest, if any, is not kept).  Marked members are inflated on all
 * cores; any other gzip file member after member in one thread.  0, or -1 when the file is
 * damaged or holds fewer bytes. */
int dm_gz_inflate(const unsigned char *gz, size_t gz_len, unsigned char *out, size_t out_len);

#endif
