/* A one-line progress report on stderr (voxels done, rate, time left), redrawn when stderr is
 * a terminal; when it is not (a log file, a pipe), one line at the start and one summary line
 * at the end instead.  DIMOC_PROGRESS=1 forces the redrawn line, DIMOC_PROGRESS=0 silences
 * both.  Thread-safe: add may be called from any thread. */
#ifndef DIMOC_PROGRESS_H
#define DIMOC_PROGRESS_H

typedef struct dm_progress dm_progress;

dm_progress *dm_progress_start(const char *label, long total, const char *unit);
void dm_progress_add(dm_progress *p, long done_now); /* adds to the done count */
void dm_progress_end(dm_progress *p);                /* final line, newline, free */
/* The same, with `note` (e.g. "199870 fitted, 130 skipped") at the end of the final line. */
void dm_progress_finish(dm_progress *p, const char *note);

/* Monotonic seconds (an arbitrary origin): the clock of the progress line and of the stage
 * timings that provenance.json records. */
double dm_now_seconds(void);

#endif
