/* A small ball & two sticks phantom with known truth, for the demo and the tests. */
#ifndef DIMOC_PHANTOM_H
#define DIMOC_PHANTOM_H

#include "util/json.h"

/* Writes, in DIR (created when missing), the ball_2_sticks parameter maps S0 d f1 th1 ph1 f2
 * th2 ph2, the fibre directions dyads1 and dyads2 (3 volumes), regions and mask, as .nii.gz
 * of 4 size x size x 2 voxels with 2 mm voxels.  The four regions lie side by side along x:
 * 1 one fibre along x, 2 two fibres crossing at 90 degrees, 3 crossing at 60 degrees, 4 free
 * water.  With provenance.json (prov), all or nothing: DIR is replaced whole
 * (util/outdir.h).  0, or -1 with dm_last_error(). */
int dm_phantom_write(const char *dir, int size, dm_provenance *prov);

#endif
