/* Stopping cleanly on SIGINT and SIGTERM.  main() installs the handlers once; a signal only
 * sets a flag, which the long loops (voxels, batches, streamlines, chunks of a map being
 * written) test with dm_stop_requested() to stop early; the engine then removes its temporary
 * output and returns -1 (dm_stop_error()), and main() exits 128 + the signal (130, 143).
 * A second signal kills the process at once (the default action).
 *
 * Child processes (the host compiler, a pipeline's bash) run in their own process group
 * through dm_run_child(), which forwards a signal to the whole group and waits for it. */
#ifndef DIMOC_INTERRUPT_H
#define DIMOC_INTERRUPT_H

#include <signal.h>

/* SIGINT and SIGTERM set the flag (and are reset to their default action). */
void dm_interrupt_install(void);
/* The signal received (SIGINT, SIGTERM), 0 when none. */
int dm_stop_requested(void);
/* For a command whose partial result is a result (tractography stopped early writes the
 * streamlines it has, as tckgen does): takes the stop request, so that the outputs can still
 * be committed, and returns its signal (0: none).  The exit status stays 128 + the signal. */
int dm_stop_take(void);
/* The signal taken by dm_stop_take (0: none). */
int dm_stop_taken(void);
/* Records "interrupted by SIGINT" (or SIGTERM) as the error and returns -1. */
int dm_stop_error(void);
/* Blocks SIGINT and SIGTERM (a critical section, e.g. renaming outputs into place); the
 * signal, if any, is delivered at dm_interrupt_unblock(). */
void dm_interrupt_block(sigset_t *saved);
void dm_interrupt_unblock(const sigset_t *saved);

/* Runs argv (argv[0] looked up in PATH) in a new process group, stdout and stderr to
 * log_path when not NULL, and waits for it; on a stop request the group gets the signal.
 * Returns the child's exit status, 128 + the signal that ended it, or -1 (cannot start it,
 * with dm_last_error()). */
int dm_run_child(char *const argv[], const char *log_path);

/* Threads that work beside a run's path (writes, the next run's read-ahead): on a machine
 * whose cores the path's own threads keep busy, they take what is left.  Lowers the calling
 * thread's scheduling priority by 10 nice levels (Linux schedules each thread on its own; the
 * threads it starts after, its OpenMP team among them, inherit it).  For a thread of its own
 * only: the priority is never raised again.  Nothing happens where the system refuses. */
void dm_thread_background(void);

#endif
