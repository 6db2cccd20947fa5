/* A one-line progress report on stderr (voxels done, rate, time left), shown only when stderr
 * is a terminal; silent when piped.  Thread-safe: update may be called from any thread. */
#ifndef DIMOC_PROGRESS_H
#define DIMOC_PROGRESS_H

typedef struct dm_progress dm_progress;

dm_progress *dm_progress_start(const char *label, long total, const char *unit);
void dm_progress_add(dm_progress *p, long done_now); /* adds to the done count */
void dm_progress_end(dm_progress *p);                /* final line, newline, free */

#endif
