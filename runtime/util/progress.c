/* One-line progress on stderr: "fit: 12345/200000 voxels  2100 vox/s  ETA 1m32s", redrawn at
 * most five times a second with '\r', only when stderr is a terminal (or when the environment
 * variable DIMOC_PROGRESS=1 forces it, for tests); otherwise a start line and a summary line,
 * so that a log still says what ran and how long it took.  Worker threads add with an atomic
 * counter; one of them at a time redraws (trylock, so no thread ever waits). */
#include "util/progress.h"
#include "util/error.h"
#include "util/interrupt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct dm_progress {
    char label[64];
    char unit[32];
    char rate_unit[32];
    long total;
    atomic_long done;
    int shown; /* 1: the redrawn line; 0: start and summary lines; -1: nothing */
    double start;
    _Atomic double last_draw; /* read without the lock to skip it cheaply */
    int last_len;
    pthread_mutex_t draw_lock;
};

double dm_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void format_duration(char *out, size_t size, double seconds)
{
    long s = seconds < 0 ? 0 : (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(out, size, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else if (s >= 60)
        snprintf(out, size, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(out, size, "%lds", s);
}

static _Thread_local int quiet_thread;

void dm_progress_quiet(int on)
{
    quiet_thread = on;
}

dm_progress *dm_progress_start(const char *label, long total, const char *unit)
{
    if (quiet_thread) return NULL;
    dm_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    /* "voxels" reads best as "vox/s"; other units keep their name. */
    snprintf(p->rate_unit, sizeof p->rate_unit, "%s",
             strcmp(p->unit, "voxels") == 0 ? "vox" : p->unit);
    p->total = total;
    atomic_init(&p->done, 0);
    const char *force = getenv("DIMOC_PROGRESS");
    p->shown = (force && *force) ? (strcmp(force, "0") != 0 ? 1 : -1) : isatty(2);
    p->start = dm_now_seconds();
    if (p->shown == 0) {
        fprintf(stderr, "%s: %ld %s\n", p->label, total, p->unit);
        fflush(stderr);
    }
    atomic_init(&p->last_draw, p->start);
    pthread_mutex_init(&p->draw_lock, NULL);
    return p;
}

/* Writes the line padded with spaces over the previous one; the caller holds draw_lock. */
static void draw(dm_progress *p, const char *line, const char *tail)
{
    int len = (int)strlen(line);
    int pad = p->last_len > len ? p->last_len - len : 0;
    fprintf(stderr, "\r%s%*s%s", line, pad, "", tail); /* spaces wipe a longer old line */
    fflush(stderr);
    p->last_len = len;
}

void dm_progress_add(dm_progress *p, long done_now)
{
    if (!p) return;
    long done = atomic_fetch_add(&p->done, done_now) + done_now;
    if (p->shown != 1) return;
    double t = dm_now_seconds();
    if (t - p->last_draw < 0.2 || pthread_mutex_trylock(&p->draw_lock) != 0) return;
    if (t - p->last_draw >= 0.2) {
        p->last_draw = t;
        double elapsed = t - p->start;
        double rate = elapsed > 0 ? done / elapsed : 0;
        char eta[32] = "?";
        if (rate > 0 && p->total > 0) format_duration(eta, sizeof eta, (p->total - done) / rate);
        char line[256];
        snprintf(line, sizeof line, "%s: %ld/%ld %s  %.0f %s/s  ETA %s", p->label, done, p->total,
                 p->unit, rate, p->rate_unit, eta);
        draw(p, line, "");
    }
    pthread_mutex_unlock(&p->draw_lock);
}

void dm_progress_finish(dm_progress *p, const char *note)
{
    if (!p) return;
    if (p->shown >= 0) {
        pthread_mutex_lock(&p->draw_lock);
        long done = atomic_load(&p->done);
        double elapsed = dm_now_seconds() - p->start;
        char took[32];
        format_duration(took, sizeof took, elapsed);
        char line[512];
        if (dm_stop_requested())
            snprintf(line, sizeof line, "%s: stopped after %ld of %ld %s (%s)", p->label, done,
                     p->total, p->unit, took);
        else
            snprintf(line, sizeof line, "%s: %ld %s in %s (%.0f %s/s)%s%s", p->label, done, p->unit,
                     took, elapsed > 0 ? done / elapsed : 0.0, p->rate_unit, note ? ", " : "",
                     note ? note : "");
        if (p->shown)
            draw(p, line, "\n");
        else
            fprintf(stderr, "%s\n", line);
        pthread_mutex_unlock(&p->draw_lock);
    }
    pthread_mutex_destroy(&p->draw_lock);
    free(p);
}

void dm_progress_end(dm_progress *p)
{
    dm_progress_finish(p, NULL);
}

/* ---- the watch of a run in memory ---- */

#define WATCH_POLL_SECONDS 0.02
#define WATCH_REPORT_SECONDS 0.1

void dm_watch_init(dm_watch *w, void (*progress)(void *, const char *, double),
                   int (*cancel)(void *), void *user)
{
    w->progress = progress;
    w->cancel = cancel;
    w->user = user;
    w->owner = pthread_self();
    atomic_init(&w->cancelled, 0);
    w->stage = NULL;
    w->last_poll = w->last_report = 0;
}

void dm_watch_report(dm_watch *w, const char *stage, double fraction)
{
    if (!w || !pthread_equal(w->owner, pthread_self())) return;
    double now = dm_now_seconds();
    int new_stage = !w->stage || strcmp(w->stage, stage) != 0;
    if (!new_stage && fraction < 1 && now - w->last_report < WATCH_REPORT_SECONDS) return;
    w->stage = stage;
    w->last_report = now;
    if (w->progress) w->progress(w->user, stage, fraction < 0 ? 0 : fraction > 1 ? 1 : fraction);
}

int dm_watch_stopping(dm_watch *w)
{
    if (dm_stop_requested()) return 1;
    if (!w) return 0;
    if (w->cancel && !atomic_load(&w->cancelled) && pthread_equal(w->owner, pthread_self())) {
        double now = dm_now_seconds();
        if (now - w->last_poll >= WATCH_POLL_SECONDS) {
            w->last_poll = now;
            if (w->cancel(w->user)) atomic_store(&w->cancelled, 1);
        }
    }
    return atomic_load(&w->cancelled);
}

int dm_watch_cancelled(const dm_watch *w)
{
    return w && atomic_load(&w->cancelled);
}

int dm_watch_tick(dm_watch *w, const char *stage, size_t *mine, atomic_size_t *done,
                  size_t total)
{
    if (++*mine < DM_WATCH_TICK) return 0;
    size_t all = atomic_fetch_add(done, *mine) + *mine;
    *mine = 0;
    dm_watch_report(w, stage, total ? (double)all / (double)total : 0);
    return dm_watch_stopping(w);
}

int dm_watch_stop_error(const dm_watch *w)
{
    if (dm_watch_cancelled(w)) return dm_set_error("cancelled");
    return dm_stop_error();
}
