/* MRtrix .tck streamline files: a text header ("mrtrix tracks", "key: value" lines, "END")
 * whose "file: . OFFSET" gives where the data start; the data are x y z triplets in world mm
 * (Float32LE when written here; Float32BE, Float64LE and Float64BE are read too), each
 * streamline ended by a NaN triplet and the file by an Inf triplet. */
#ifndef DIMOC_TRACK_TCK_H
#define DIMOC_TRACK_TCK_H

#include <stddef.h>

typedef struct dm_tck_writer dm_tck_writer;

/* The bytes of a header as dm_tck_open writes it, up to where the points start (padding
 * included), with zero counts: "count: " + 12 digits at byte *count_at, then "\ntotal_count: "
 * + 12 digits.  malloc'd, *len its length; NULL with dm_last_error(). */
char *dm_tck_header(const char *info, size_t *len, long *count_at);
/* Opens a temporary sibling of path; NULL with dm_last_error(). `info` lines ("key: value";
 * other lines, and the keys file, count, total_count and datatype, are left out)
 * are added to the header (may be NULL). */
dm_tck_writer *dm_tck_open(const char *path, const char *info);
/* Appends one streamline of n points (3 floats each, world mm). */
void dm_tck_add(dm_tck_writer *w, const float *xyz, int n);
/* Appends `count` streamlines at once, streamline i npts[i] points from xyz + 3 start[i], laid
 * out and written by `threads` threads in parallel (a GPU run's .tck is gigabytes).  0, or -1
 * when the write failed (dm_tck_close then fails too). */
int dm_tck_add_many(dm_tck_writer *w, const float *xyz, const size_t *start, const int *npts,
                    long count, int threads);
/* Ends the file, writes the final counts into the header (count: streamlines in the file;
 * total_count: streamlines generated to get them, as MRtrix's tckgen writes), renames into
 * place.  0 or -1. */
int dm_tck_close(dm_tck_writer *w, unsigned long long total_count);
/* Drops the temporary file (after an error elsewhere). */
void dm_tck_abort(dm_tck_writer *w);
/* A file of bare points, Float32LE x y z after x y z with neither header nor NaN triplets (the
 * positions of a TRX file), written at `path` itself by dm_tck_add / dm_tck_add_many as above;
 * dm_tck_close_points ends it (0, or -1 when a write failed; the file is left to the caller),
 * dm_tck_abort removes it. */
dm_tck_writer *dm_tck_open_points(const char *path);
int dm_tck_close_points(dm_tck_writer *w);
/* Streamlines added so far: the count dm_tck_close will write. */
long dm_tck_written(const dm_tck_writer *w);

/* Values per streamline of a tractogram that carries them (TRX's dps/, a .trk's properties):
 * count x ncols floats, streamline after streamline. */
typedef struct dm_tract_values {
    char *name;
    int ncols;
    float *values;
} dm_tract_values;

/* A named set of streamlines (TRX's groups/): n indices into the tractogram. */
typedef struct dm_tract_group {
    char *name;
    long n;
    unsigned int *index;
} dm_tract_group;

/* The reference grid of a tractogram that names one (TRX, .trk): the image's size and its
 * voxel -> world (RAS+) mm matrix, row-major. */
typedef struct dm_tract_grid {
    int valid; /* 0: none (a .tck) */
    int dims[3];
    double vox2ras[4][4];
} dm_tract_grid;

/* A whole tractogram in memory (a .tck file, or a TRX or .trk through tractogram/tractogram.h). */
typedef struct dm_tck {
    float *xyz;         /* every point, 3 floats each, streamline after streamline */
    long *npoints;      /* points of each streamline (0 for an empty one) */
    long *start;        /* count + 1 entries: streamline i is points start[i] .. start[i+1]-1 */
    long count;         /* streamlines in the file */
    long header_count;  /* the header's "count", -1 when it has none */
    char *properties;   /* the header's "key: value" lines, as written (NUL-terminated) */
    dm_tract_grid grid; /* TRX and .trk: the reference image's grid */
    int ndps;           /* per-streamline values (TRX dps/, .trk properties) */
    dm_tract_values *dps;
    int ngroups; /* TRX groups/ */
    dm_tract_group *groups;
} dm_tck;

/* Reads path into t.  Stricter than MRtrix, which reads whatever comes before an Inf triplet
 * or the end of the file and silently drops an unfinished last streamline: here a file must
 * hold whole points, a streamline must end with its NaN triplet, and the header's count (when
 * given) must be the number of streamlines found.  A file that ends without the Inf triplet
 * (a writer stopped after its last whole streamline) is accepted when the count agrees.
 * Bytes after the Inf triplet are ignored, as by MRtrix.  A point must be finite (MRtrix
 * reads a triplet by its x alone: NaN x ends the streamline, Inf x the file).  0, or -1 with
 * one dm_last_error() line naming the file and what is wrong; t is then empty. */
int dm_tck_read(const char *path, dm_tck *t);
/* The same on `threads` threads (0: OpenMP's default). */
int dm_tck_read_threads(const char *path, dm_tck *t, int threads);
/* The value of a header key ("step_size", say) as a malloc'd string; NULL when absent. */
char *dm_tck_property(const dm_tck *t, const char *key);
void dm_tck_free(dm_tck *t);
/* The per-streamline values called `name`, or NULL. */
const dm_tract_values *dm_tck_dps(const dm_tck *t, const char *name);

/* Per-streamline weights, the text file of MRtrix's -tck_weights_in and tcksift2's output: one
 * number per streamline of a .tck, in its order, separated by white space or ',' ('#' starts a
 * comment that runs to the end of the line, as in MRtrix's text files).  The values are kept
 * in single precision, as MRtrix reads them.  `count` is the tractogram's streamline count
 * (tck_path names it in the message).  0 with *weights (count floats, malloc'd; NULL when
 * count is 0), or -1 with one dm_last_error() line naming the file and what is wrong: it
 * cannot be read, a value is not a number, is negative, is not finite (or beyond single
 * precision), or the file holds a number of values other than `count`. */
int dm_tck_weights_read(const char *path, long count, const char *tck_path, float **weights);
/* The same file's values however many there are: *values (malloc'd; NULL for none) and *n.  0,
 * or -1 with the error as above (the count aside). */
int dm_tck_values_read(const char *path, float **values, long *n);
/* Writes `count` weights to path, one a line (%.9g: read back as the same floats); weights
 * NULL writes 1 for every streamline.  To path directly; 0 or -1. */
int dm_tck_weights_write(const char *path, const float *weights, long count);

#endif
