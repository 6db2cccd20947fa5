/* The formats of a command's outputs (`--format mif,trx`) and of a file by its name.  The
 * choice is one per process: a command sets it once from its options, before any work, and
 * every writer of an image or a tractogram names its file through it. */
#ifndef DIMOC_IO_FORMATS_H
#define DIMOC_IO_FORMATS_H

typedef enum { DM_IMAGE_NII_GZ, DM_IMAGE_NII, DM_IMAGE_MIF, DM_IMAGE_MIF_GZ } dm_image_format;
typedef enum { DM_TRACTS_TCK, DM_TRACTS_TRX, DM_TRACTS_TRK } dm_tracts_format;

/* The help text of --format, the same for every command. */
#define DM_FORMAT_HELP                                                                             \
    "output formats, comma-joined: images nii.gz (default), nii, mif or mif.gz; tractograms tck "  \
    "(default), trx or trk (e.g. mif,trx)"

/* Parses a --format value: at most one image and one tractogram format, comma-joined.  Those
 * not named keep their defaults.  0, or -1 with dm_last_error() naming the word. */
int dm_formats_parse(const char *spec, dm_image_format *image, dm_tracts_format *tracts);
/* The process's choice (defaults: nii.gz and tck). */
void dm_formats_set(dm_image_format image, dm_tracts_format tracts);
dm_image_format dm_image_format_chosen(void);
dm_tracts_format dm_tracts_format_chosen(void);

/* The ending of a format, with its dot: ".nii.gz", ".mif", ".trx", ... */
const char *dm_image_format_ext(dm_image_format f);
const char *dm_tracts_format_ext(dm_tracts_format f);

/* The format a path's ending names (case-insensitive; .hdr/.img count as nii), or -1. */
int dm_image_format_of(const char *path);
int dm_tracts_format_of(const char *path);

/* `path` with its image ending replaced by the chosen format's: "out/FA.nii.gz" -> "out/FA.mif"
 * (malloc'd; NULL when out of memory).  A path with no image ending gets the chosen ending
 * appended. */
char *dm_image_output_name(const char *path);
/* The same for a tractogram: "out/tracks.tck" -> "out/tracks.trx". */
char *dm_tracts_output_name(const char *path);

#endif
