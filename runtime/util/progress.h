/* A one-line progress report on stderr (voxels done, rate, time left), redrawn when stderr is
 * a terminal; when it is not (a log file, a pipe), one line at the start and one summary line
 * at the end instead.  DIMOC_PROGRESS=1 forces the redrawn line, DIMOC_PROGRESS=0 silences
 * both.  Thread-safe: add may be called from any thread. */
#ifndef DIMOC_PROGRESS_H
#define DIMOC_PROGRESS_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct dm_progress dm_progress;

dm_progress *dm_progress_start(const char *label, long total, const char *unit);
/* No progress line from this thread's dm_progress_start while on (it returns NULL): the
 * library's calls, which print nothing, set it for their length. */
void dm_progress_quiet(int on);
void dm_progress_add(dm_progress *p, long done_now); /* adds to the done count */
void dm_progress_end(dm_progress *p);                /* final line, newline, free */
/* The same, with `note` (e.g. "199870 fitted, 130 skipped") at the end of the final line. */
void dm_progress_finish(dm_progress *p, const char *note);

/* Progress and cancellation of a run for a caller in memory instead of a line on stderr (the C
 * API's dimoc_context): the caller's callbacks, run on the thread that made the watch only
 * (the master thread of the run's OpenMP loops), between pieces of work: cancel at most every
 * 20 ms, progress at most every 0.1 s and at each new stage.  Workers only read the flag. */
typedef struct dm_watch {
    void (*progress)(void *user, const char *stage, double fraction);
    int (*cancel)(void *user);
    void *user;
    pthread_t owner;
    atomic_int cancelled;
    const char *stage;
    double last_poll, last_report;
} dm_watch;

void dm_watch_init(dm_watch *w, void (*progress)(void *, const char *, double),
                   int (*cancel)(void *), void *user);
/* Where the run stands: the stage and the fraction of it done (0 to 1), told when the stage is
 * new or done (fraction 1), else when due.  On the owner's thread only; w NULL: nothing. */
void dm_watch_report(dm_watch *w, const char *stage, double fraction);
/* 1 when the run is to stop: a signal (util/interrupt.h), or the caller asked (its cancel
 * polled when due, on the owner's thread).  Any thread; w NULL: signals only. */
int dm_watch_stopping(dm_watch *w);
/* Whether the caller asked to stop. */
int dm_watch_cancelled(const dm_watch *w);
/* Records why the run stopped ("cancelled", or the signal) and returns -1. */
int dm_watch_stop_error(const dm_watch *w);
/* A thread's count of a run's pieces of work (voxels) in `mine`: every DM_WATCH_TICK of them
 * they join the run's count `done` (shared by the threads), the stage's fraction of `total`
 * is told (on the owner's thread) and the cancel looked at.  1 when the run is to stop.  Any
 * thread; w NULL: signals only. */
#define DM_WATCH_TICK 256
int dm_watch_tick(dm_watch *w, const char *stage, size_t *mine, atomic_size_t *done,
                  size_t total);

/* Monotonic seconds (an arbitrary origin): the clock of the progress line and of the stage
 * timings that provenance.json records. */
double dm_now_seconds(void);

#endif
