/* Error reporting inside the runtime library: a failing function records one line and
 * returns -1 (or NULL); the program prints it with dm_report_error(). */
#ifndef DIMOC_ERROR_H
#define DIMOC_ERROR_H

#if defined(__GNUC__)
#define DM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DM_PRINTF(a, b)
#endif

/* Records the message (thread-local) and returns -1. */
int dm_set_error(const char *fmt, ...) DM_PRINTF(1, 2);
const char *dm_last_error(void);
/* Prints "dimoc: warning: ..." on stderr, or hands the line to this thread's sink. */
void dm_warn(const char *fmt, ...) DM_PRINTF(1, 2);
/* The sink of this thread's warnings (NULL: stderr again): the library, which prints nothing,
 * gives them to its caller. */
void dm_warn_capture(void (*sink)(void *user, const char *line), void *user);
/* Prints "dimoc: error: <dm_last_error()>" on stderr and returns 1 (the exit status). */
int dm_report_error(void);

#endif
