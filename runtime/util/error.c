/* Thread-local last error message; errors and warnings on stderr. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[2048];
static _Thread_local void (*warn_sink)(void *user, const char *line);
static _Thread_local void *warn_user;

int dm_set_error(const char *fmt, ...)
{
    /* Format into a scratch buffer first: callers often pass dm_last_error() itself as an
     * argument to add context ("%s: %s", path, dm_last_error()). */
    char scratch[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(scratch, sizeof scratch, fmt, ap);
    va_end(ap);
    memcpy(last_error, scratch, sizeof last_error);
    return -1;
}

const char *dm_last_error(void)
{
    return last_error[0] ? last_error : "unknown error";
}

void dm_warn(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (warn_sink) {
        warn_sink(warn_user, line);
        return;
    }
    /* One fprintf so that warnings from several threads do not interleave mid-line. */
    fprintf(stderr, "dimoc: warning: %s\n", line);
}

void dm_warn_capture(void (*sink)(void *user, const char *line), void *user)
{
    warn_sink = sink;
    warn_user = user;
}

int dm_report_error(void)
{
    fprintf(stderr, "dimoc: error: %s\n", dm_last_error());
    return 1;
}
