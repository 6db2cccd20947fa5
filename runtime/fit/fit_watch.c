/* The watch of a fit in memory (fit_inputs.h): the run's watch (util/progress.h) told the
 * fraction of each stage's pieces (voxels) done, which the fit's workers count. */
#include "fit/fit_inputs.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

void dm_fit_watch_init(dm_fit_watch *w, void (*progress)(void *, const char *, double),
                       int (*cancel)(void *), void *user)
{
    dm_watch_init(&w->base, progress, cancel, user);
    atomic_init(&w->done, 0);
    w->total = 0;
}

static int on_owner(const dm_fit_watch *w)
{
    return pthread_equal(w->base.owner, pthread_self());
}

static double fraction_done(const dm_fit_watch *w)
{
    return w->total > 0 ? (double)atomic_load(&w->done) / (double)w->total : 0;
}

void dm_fit_watch_done(dm_fit_watch *w)
{
    if (!w || !on_owner(w) || !w->base.stage) return;
    atomic_store(&w->done, w->total > 0 ? w->total : 1);
    if (w->total <= 0) w->total = 1;
    dm_watch_report(&w->base, w->base.stage, 1);
}

void dm_fit_watch_stage(dm_fit_watch *w, const char *stage, long total)
{
    if (!w || !on_owner(w)) return;
    dm_fit_watch_done(w); /* the stage before it ended */
    w->total = total;
    atomic_store(&w->done, 0);
    dm_watch_report(&w->base, stage, 0);
    dm_fit_watch_poll(w);
}

void dm_fit_watch_poll(dm_fit_watch *w)
{
    if (!w || !on_owner(w)) return;
    dm_watch_stopping(&w->base); /* the caller's cancel, when due */
    if (w->base.stage) dm_watch_report(&w->base, w->base.stage, fraction_done(w));
}

void dm_fit_watch_add(dm_fit_watch *w, long n)
{
    if (!w) return;
    atomic_fetch_add(&w->done, n);
    dm_fit_watch_poll(w);
}

int dm_fit_stopping(dm_fit_watch *w)
{
    return w ? dm_watch_stopping(&w->base) : dm_stop_requested();
}

int dm_fit_stop_error(const dm_fit_watch *w)
{
    return dm_watch_stop_error(w ? &w->base : NULL);
}
