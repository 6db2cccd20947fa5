/* FOD tractography on host threads: the kernel (templates/fodtrack/fod_track.h) built for the
 * host in both precisions, each streamline traced to its end by one thread. */
#ifndef DIMOC_FODTRACK_CPU_H
#define DIMOC_FODTRACK_CPU_H

#include "fodtrack/fodtrack_batch.h"
#include "util/progress.h"

/* Traces ids [first, first + n) into b (reset here) on `threads` threads (0: all), in double
 * or float.  buf_points: the per-streamline point buffer (dm_ft_plan.buf_points).  Returns 0,
 * -1 when a stop was requested meanwhile (a signal, or watch's caller: the batch is then
 * incomplete, discard it), or -2 with an error when there was no memory for the batch's
 * points.  watch (NULL: none) is polled by the calling thread between its streamlines. */
int dm_ft_cpu_batch(const dm_ft_ctx *c, int use_double, int buf_points, unsigned long long first,
                    long n, int threads, dm_watch *watch, dm_ft_batch *b);

#endif
