/* dimoc track --fod: FOD streamline tractography with tckgen's semantics (iFOD2, iFOD1,
 * SD_STREAM), on host threads or GPUs, writing tracks.tck and optionally a track-density image,
 * a connectome and a per-streamline weights file, all or nothing in --out. */
#ifndef DIMOC_FODTRACK_RUN_H
#define DIMOC_FODTRACK_RUN_H

#include "fodtrack/fodtrack_plan.h"
#include "util/json.h"

/* Runs the whole command.  On SIGINT / SIGTERM tracking stops at the end of the current batch and
 * the streamlines kept so far are written (as tckgen does: a valid, shorter tracks.tck with its
 * counts right); the command then returns -1 with "interrupted" as the error.  weights: a file
 * name in --out for one weight per streamline of tracks.tck, in its order (1 each: a file that
 * tools taking -tck_weights_in, or a filtering that replaces the weights, start from; as many
 * lines as tracks.tck has streamlines, an interrupted run's too); NULL: none. */
int dm_fodtrack_command(const dm_fodtrack_options *o, const char *weights, dm_provenance *prov);

#endif
