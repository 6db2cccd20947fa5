/* The watch of a fit in memory (fit_inputs.h): the caller's progress and cancel callbacks,
 * called on the caller's own thread only (the master thread of the fit's OpenMP loops, or the
 * thread waiting for the GPUs), at most every POLL_SECONDS for cancel and REPORT_SECONDS for
 * progress, so that a caller's callback costs nothing against the fit. */
#include "fit/fit_inputs.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

#define POLL_SECONDS 0.02
#define REPORT_SECONDS 0.1

void dm_fit_watch_init(dm_fit_watch *w, void (*progress)(void *, const char *, double),
                       int (*cancel)(void *), void *user)
{
    w->progress = progress;
    w->cancel = cancel;
    w->user = user;
    w->owner = pthread_self();
    atomic_init(&w->cancelled, 0);
    atomic_init(&w->done, 0);
    w->total = 0;
    w->stage = "";
    w->last_poll = w->last_report = 0;
}

static int on_owner(const dm_fit_watch *w)
{
    return pthread_equal(w->owner, pthread_self());
}

static void report(dm_fit_watch *w, double now)
{
    w->last_report = now;
    if (!w->progress) return;
    long done = atomic_load(&w->done);
    double fraction = w->total > 0 ? (double)done / (double)w->total : 0;
    w->progress(w->user, w->stage, fraction > 1 ? 1 : fraction);
}

void dm_fit_watch_done(dm_fit_watch *w)
{
    if (!w || !on_owner(w) || !w->stage[0]) return;
    atomic_store(&w->done, w->total > 0 ? w->total : 1);
    if (w->total <= 0) w->total = 1;
    report(w, dm_now_seconds());
}

void dm_fit_watch_stage(dm_fit_watch *w, const char *stage, long total)
{
    if (!w || !on_owner(w)) return;
    dm_fit_watch_done(w); /* the stage before it ended */
    w->stage = stage;
    w->total = total;
    atomic_store(&w->done, 0);
    report(w, dm_now_seconds());
    dm_fit_watch_poll(w);
}

void dm_fit_watch_poll(dm_fit_watch *w)
{
    if (!w || !on_owner(w)) return;
    double now = dm_now_seconds();
    if (now - w->last_poll >= POLL_SECONDS) {
        w->last_poll = now;
        if (w->cancel && !atomic_load(&w->cancelled) && w->cancel(w->user))
            atomic_store(&w->cancelled, 1);
    }
    if (now - w->last_report >= REPORT_SECONDS) report(w, now);
}

void dm_fit_watch_add(dm_fit_watch *w, long n)
{
    if (!w) return;
    atomic_fetch_add(&w->done, n);
    dm_fit_watch_poll(w);
}

int dm_fit_stopping(dm_fit_watch *w)
{
    return dm_stop_requested() || (w && atomic_load(&w->cancelled));
}

int dm_fit_stop_error(const dm_fit_watch *w)
{
    if (w && atomic_load(&w->cancelled)) return dm_set_error("cancelled");
    return dm_stop_error();
}
