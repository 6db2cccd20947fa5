/* The file side of FOD tractography and of what follows it: the commands `dimoc track --fod`,
 * `dimoc tdi` and `dimoc connectome`, which read their images and tractograms into memory, run
 * the engines of this folder on them (fodtrack_run.h, tdi.h, connectome.h: the C API's too)
 * and write what those make.  The rest of the folder reads and writes no image and no
 * tractogram, so that the library links it without their I/O. */
#ifndef DIMOC_FODTRACK_FILES_H
#define DIMOC_FODTRACK_FILES_H

#include "fodtrack/connectome.h"
#include "fodtrack/fodtrack_plan.h"
#include "fodtrack/tdi.h"
#include "util/json.h"

/* `dimoc track --fod`: reads o->fod, the seed (o->seed or o->seed_gmwmi), o->act and the
 * region lists, tracks, and writes tracks.tck (.trx, .trk: --format), provenance.json and what
 * is asked for (o->tdi, o->connectome, weights) in o->out, all or nothing.  On SIGINT /
 * SIGTERM tracking stops at the end of the current batch and the streamlines kept so far are
 * written (as tckgen does: a valid, shorter tracks.tck with its counts right); the command then
 * returns -1 with "interrupted" as the error.  weights: a file name in --out for one weight per
 * streamline of tracks.tck, in its order (1 each: a file that tools taking -tck_weights_in, or
 * a filtering that replaces the weights, start from; as many lines as tracks.tck has
 * streamlines, an interrupted run's too); NULL: none. */
int dm_fodtrack_command(const dm_fodtrack_options *o, const char *weights, dm_provenance *prov);

/* Writes the map on its own grid to path (a temporary name renamed into place when whole):
 * the counts as uint32 (tckmap's type for a TDI), or with weights their sums as float32
 * (tckmap's type with -tck_weights_in). */
int dm_tdi_write(const dm_tdi *m, const char *path);

typedef struct dm_tdi_options {
    const char *tracks, *templ, *out;
    const char *weights; /* per-streamline weights: a file (tractogram/tck.h) or "dps:NAME" (the
                          * tractogram's own, tractogram/tractogram.h); NULL: 1 each */
    double voxel_mm[3];  /* all 0: the template's grid */
    int threads;         /* 0: all cores */
    int exact;           /* 1: the exact walk; 0: tckmap's sampling (its ratio from step_size) */
} dm_tdi_options;

/* `dimoc tdi`: reads the tracks, the weights (when given) and the template, maps, writes
 * --out and its provenance beside it (OUT.provenance.json), the two put in place together;
 * nothing is written when an input is wrong. */
int dm_tdi_command(const dm_tdi_options *o, dm_provenance *prov, dm_tdi_summary *s);

/* Reads a parcellation image (dm_parcellation_from's checks, naming the file). */
int dm_parcellation_read(const char *path, dm_parcellation *p);

typedef struct dm_connectome_options {
    const char *tracks, *parc, *out;
    const char *weights; /* per-streamline weights: a file (tractogram/tck.h) or "dps:NAME" (the
                          * tractogram's own, tractogram/tractogram.h); NULL: 1 each */
    int threads;         /* 0: all cores */
} dm_connectome_options;

/* `dimoc connectome`: DIR/connectome.csv (counts, or sums of weights), DIR/mean_length.csv
 * and DIR/provenance.json, the folder all or nothing (util/outdir.h).  Every input, the
 * weights included, is read and checked before the folder is begun. */
int dm_connectome_command(const dm_connectome_options *o, dm_provenance *prov,
                          dm_connectome *result);

#endif
