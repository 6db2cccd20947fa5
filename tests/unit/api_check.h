/* What the C API's unit tests share: a working folder where the command runs (`dir`), and
 * the callbacks of a dimoc_context that record where they ran and cancel after some polls. */
#ifndef DIMOC_TEST_API_CHECK_H
#define DIMOC_TEST_API_CHECK_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static char dir[1024];

/* A shell command run in `dir`; its exit status as system() gives it. */
static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(cmd, sizeof cmd, "cd '%s' && ", dir);
    vsnprintf(cmd + n, sizeof cmd - n, fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* The context's callbacks: where they ran, and a cancel after `after` polls (never if < 0). */
typedef struct seen {
    pthread_t caller;
    int progress, cancels, off_thread, after;
    char last_stage[32];
} seen;

static void on_progress(void *user, const char *stage, double fraction) __attribute__((unused));
static void on_progress(void *user, const char *stage, double fraction)
{
    seen *s = user;
    s->progress++;
    if (!pthread_equal(s->caller, pthread_self())) s->off_thread++;
    snprintf(s->last_stage, sizeof s->last_stage, "%s", stage);
    (void)fraction;
}

static int on_cancel(void *user) __attribute__((unused));
static int on_cancel(void *user)
{
    seen *s = user;
    if (!pthread_equal(s->caller, pthread_self())) s->off_thread++;
    return ++s->cancels > s->after && s->after >= 0;
}

#endif
