/* The tracking kernel (track_kernel.h) compiled for the host. */
#ifndef DIMOC_TRACK_KERNEL_HOST_H
#define DIMOC_TRACK_KERNEL_HOST_H

#include <math.h>
#ifndef DM_FN
#define DM_FN static inline
#endif
#include "maths/philox.h"
#include "track/track_kernel.h"

#endif
