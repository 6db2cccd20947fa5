/* COMMIT's dictionary on disk, so that the dictionary stage can run apart (`dimoc commit --stage
 * dictionary [--part K/N]`) and a later run take it (`--dictionary DIR`).  Two files, all
 * numbers little-endian, no padding (docs/commit.md, "The dictionary in parts"):
 *
 *   dictionary_header.bin  200 bytes (format 1; 232 with blur, format 2; 240 with blur of some
 *                          streamlines, format 3): the facts of the
 *                          inputs and options the dictionary was made from
 *                          (dm_commit_dict_facts below), the same in every part
 *   dictionary.bin         one record per streamline of the share, in streamline order:
 *                            u32 id, u32 nseg (0: not kept), f32 length in the mask, f32 norm,
 *                            nseg x (u32 grid voxel (x fastest), u16 direction, f32 length mm)
 *                          so the parts' files joined in order are the whole run's file.
 *
 * The voxels of the fit are not stored: they follow from the segments of all the streamlines
 * (dm_commit_dict_index), once the parts are joined. */
#ifndef DIMOC_COMMIT_DICTFILE_H
#define DIMOC_COMMIT_DICTFILE_H

#include "commit/commit_dict.h"

#include <stdint.h>

#define DM_COMMIT_DICT_HEADER "dictionary_header.bin"
#define DM_COMMIT_DICT_RECORDS "dictionary.bin"

/* What a dictionary depends on besides the code: the tractogram (its streamline count and a
 * checksum of its points), the image grid, the mask, the direction table and the options. */
typedef struct dm_commit_dict_facts {
    uint64_t nstr;
    uint64_t tck_hash; /* 64-bit hash of the point counts and the points' float bits */
    int nx, ny, nz;
    int has_mask;
    uint64_t mask_hash; /* of the binarised mask (0 without one) */
    unsigned ndirs;
    double w2v[3][4], shift[3], min_seg_len, min_len, max_len;
    /* the blur (all 0 without it: then the header is format 1, of 200 bytes; with it format 2,
     * the four appended as f64; with --blur-apply-to format 3, 240 bytes, the hash of its flags
     * appended as u64) */
    double blur_core, blur_gauss, blur_spacing, blur_gauss_min;
    uint64_t blur_apply_hash; /* 0: every streamline blurred */
} dm_commit_dict_facts;

/* The facts of this run's inputs (the hashes on `threads` threads; the same whatever their
 * number). */
void dm_commit_dict_facts_make(const dm_tck *t, const dm_commit_grid *g, unsigned ndirs,
                               const dm_commit_dict_options *o, int threads,
                               dm_commit_dict_facts *f);

/* Writes the two files into dir: the header, and the records of streamlines [first, end) of d,
 * a dictionary as dm_commit_dict_cut leaves it (grid voxels).  0, or -1 with the error set. */
int dm_commit_dict_save(const char *dir, const dm_commit_dict_facts *f, const dm_commit_dict *d,
                        long first, long end);

/* Reads the whole dictionary saved in dir (by a run without --part, or the parts joined by
 * `dimoc merge`) into d as dm_commit_dict_cut leaves it, after checking that it was made from
 * the facts `want` of this run.  0, or -1 with one error line naming dir and the first fact
 * that differs (or the damage: a part missing, a truncated file). */
int dm_commit_dict_load(const char *dir, const dm_commit_dict_facts *want, const dm_commit_grid *g,
                        dm_commit_dict *d);

#endif
