/* NIfTI and MRtrix images in memory (NIfTI headers through niftilib, data bytes through znzlib;
 * .mif, .mif.gz and .mih through io/mif.h), chosen by the path's ending. */
#ifndef DIMOC_VOLUME_H
#define DIMOC_VOLUME_H

#include <stddef.h>

typedef struct dm_volume {
    int nx, ny, nz, nt; /* nt = 1 for a 3D image */
    double *data;       /* nx*ny*nz*nt values, x fastest, then y, z, volume (NIfTI order) */
    void *geometry;     /* nifti_image* without data: dims, voxel sizes, qform/sform, units */
    double *dw_scheme;  /* an MRtrix image's gradient table: dw_rows x 4 (x y z in world
                         * coordinates, b), as its header has it; NULL when none */
    int dw_rows;
    char *keyvals; /* an MRtrix header's other "key: value" lines, each ending in '\n'; or NULL */
} dm_volume;

#define DM_NVOX(v) ((size_t)(v)->nx * (v)->ny * (v)->nz)

/* Reads a NIfTI-1 or NIfTI-2 file (.nii, .nii.gz, .hdr/.img) of any data type, scaled by
 * scl_slope/scl_inter, or an MRtrix image (.mif, .mif.gz, .mih: any layout, scaled by its
 * `scaling`; its spatial axes in the order stored, io/mif.h), into doubles.  Returns 0, or -1
 * with dm_last_error() naming the file and what is wrong (unreadable, truncated, not NIfTI or
 * MRtrix, more than 4 dimensions).  NaN and Inf values are kept as they are in the file. */
int dm_volume_read(const char *path, dm_volume *vol);
/* Reads path into a cache of two volumes (the least recently used one goes), for a later
 * dm_volume_read of the same, unchanged file (device, inode, size and modification time
 * alike), which then gets a copy instead of reading the file; a read of a file being preloaded
 * waits for it.  Meant to run on a thread of its own while the caller works on something else
 * (`dimoc bids`: the next run's DWI while this one fits).  Thread-safe.  0, or -1 with
 * dm_last_error() (the later read reports the same). */
int dm_volume_preload(const char *path);
/* dm_volume_preload, and then(vol, ctx) on this thread with the volume just read, before the
 * cache lets any reader have it (a read of the file waits meanwhile); not called when the file
 * is cached or being read already, or its read failed. */
int dm_volume_preload_then(const char *path, void (*then)(const dm_volume *vol, void *ctx),
                           void *ctx);
/* The next dm_volume_read of path's cached volume takes the volume itself instead of a copy,
 * and the cache lets go of it (the last of a run's reads of its DWI).  1 when it is cached (or
 * being read), 0 when not.  Thread-safe. */
int dm_volume_preload_hand_over(const char *path);
/* Empties the cache (waiting for reads under way). */
void dm_volume_preload_clear(void);
/* The header alone: sizes and geometry, vol->data NULL (the values are not read or checked);
 * a file in the read-ahead cache (dm_volume_preload) gives its header from there. */
int dm_volume_read_header(const char *path, dm_volume *vol);
/* Same spatial grid (nx, ny, nz) as ref, else -1 naming `path` and both shapes. */
int dm_volume_check_same_grid(const dm_volume *vol, const char *path, const dm_volume *ref,
                              const char *ref_path);
void dm_volume_free(dm_volume *vol);

/* Output data types of dm_volume_write. */
enum { DM_OUT_FLOAT32 = 0, DM_OUT_UINT8 = 1, DM_OUT_FLOAT64 = 2, DM_OUT_UINT32 = 3 };

/* Values [first, first + n) of an image being written, in NIfTI order (x fastest, then y, z,
 * volume), into out: the source of dm_volume_write_made, which need not hold the image.  Called
 * from several threads at once. */
typedef void (*dm_volume_values)(void *ctx, size_t first, size_t n, double *out);

/* The values of a map held for some voxels only (a mask's, a fit's): volume c of listed voxel i
 * is vals[i * stride + c * volume_stride + first] (volume_stride 1: a voxel's values side by
 * side; n: each volume's values together, as the image holds them), or the same of fvals when
 * vals is NULL; every other voxel, and a listed one whose `keep` byte is 0, is 0.
 * dm_masked_values_get is its dm_volume_values. */
typedef struct dm_masked_values {
    size_t nvox;               /* voxels of a volume of the grid */
    const size_t *vox;         /* the n listed voxels' grid indices, ascending */
    size_t n;
    const double *vals;
    const float *fvals;
    size_t stride, volume_stride, first;
    const unsigned char *keep; /* per grid voxel; NULL: every listed voxel */
} dm_masked_values;
void dm_masked_values_get(void *ctx, size_t first, size_t n, double *out);

/* Writes nt volumes (nt = 1: a 3D image) with the spatial geometry of `like`, as `type`
 * (DM_OUT_*; uint8 and uint32 values are rounded and clamped to their range): NIfTI when path
 * ends in .nii or .nii.gz, MRtrix when it ends in .mif or .mif.gz (layout +0,+1,+2[,+3], the
 * transform of the same voxel -> world mm mapping).  The file is written to a temporary name in
 * the same folder and renamed into place when whole.  Returns 0 or -1 with dm_last_error(). */
int dm_volume_write(const char *path, const dm_volume *like, int nt, const double *data, int type);
/* The same for diffusion-weighted values: a .mif carries dw_scheme (nt rows x y z b, world
 * frame; NULL: none) as its gradient table; a NIfTI file has no place for it. */
int dm_volume_write_dwi(const char *path, const dm_volume *like, int nt, const double *data,
                        int type, const double *dw_scheme);
/* The same with the values made by `values` as they are written (a .gz file block by block on
 * the threads that compress it): a map of the voxels of a mask, written without an image of
 * doubles filled first. */
int dm_volume_write_made(const char *path, const dm_volume *like, int nt, dm_volume_values values,
                         void *ctx, int type, const double *dw_scheme);
/* A temporary name beside path that keeps its .nii, .nii.gz, .mif or .mif.gz ending (malloc'd),
 * for images that go in place together with other files (util/outdir.h: dm_commit_files); NULL
 * with dm_last_error() when path has none of them. */
char *dm_volume_temp_name(const char *path);
/* Writes a 3D image on a grid of its own: nx*ny*nz values and the voxel -> world mm matrix
 * (row-major 4x4; written as sform, and its rotation part as qform).  As dm_volume_write
 * otherwise. */
int dm_volume_write_affine(const char *path, int nx, int ny, int nz, const double vox2world[4][4],
                           const double *data, int type);
/* DIR/NAME with NAME's image ending (.nii.gz, .nii, .mif, .mif.gz, or none) replaced by the
 * process's chosen output format (io/formats.h's dm_image_output_name: "FA.nii.gz" is
 * "FA.mif" under --format mif).  Malloc'd; NULL when out of memory. */
char *dm_volume_output_path(const char *dir, const char *name);
/* DIR/STEM of an image that exists, whatever its ending: the chosen output format's first, then
 * .nii.gz, .nii, .mif, .mif.gz; DIR/STEM with the chosen ending when none does (the name a
 * message about it gives).  Malloc'd; NULL when out of memory. */
char *dm_volume_find(const char *dir, const char *stem);
/* Writes with geometry made from scratch: identity-like sform with the given voxel size (mm). */
int dm_volume_write_new(const char *path, int nx, int ny, int nz, int nt, double voxel_mm,
                        const double *data);

/* A NIfTI file as bytes, for tools that join images without converting their values
 * (`dimoc merge`): the header (with its extensions) and the values as stored. */
typedef struct dm_volume_bytes {
    unsigned char *header; /* the bytes before the values, then the values: one block */
    size_t header_len;
    unsigned char *values; /* header + header_len: nvox * nt values of bytes_per bytes, in the
                            * file's byte order */
    size_t nvox, nt;       /* voxels per volume, volumes */
    int datatype;          /* NIfTI's DT_ code */
    int bytes_per;
    int swapped; /* the file's byte order is not the host's */
} dm_volume_bytes;

/* Reads a single-file NIfTI (.nii or .nii.gz); 0 or -1 with dm_last_error() naming the file. */
int dm_volume_bytes_read(const char *path, dm_volume_bytes *b);
/* Writes header and values as dm_volume_write would (compressed when path ends in .nii.gz,
 * through a temporary renamed into place); 0 or -1 with dm_last_error(). */
int dm_volume_bytes_write(const char *path, const dm_volume_bytes *b);
void dm_volume_bytes_free(dm_volume_bytes *b);

#endif
