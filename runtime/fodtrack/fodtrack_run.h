/* FOD streamline tractography with tckgen's semantics (iFOD2, iFOD1, SD_STREAM) on host threads
 * or a GPU: the engine.  It takes its images in memory (fodtrack_plan.h's dm_ft_inputs) and
 * hands the streamlines it keeps, batch by batch in seed-id order, to a sink: `dimoc track
 * --fod` writes them (fodtrack_files.c), the C API keeps them in memory.  The engine reads and
 * writes no file. */
#ifndef DIMOC_FODTRACK_RUN_H
#define DIMOC_FODTRACK_RUN_H

#include "fodtrack/fodtrack_batch.h"
#include "fodtrack/fodtrack_plan.h"
#include "util/json.h"
#include "util/progress.h"

struct dm_ft_gpu;

/* Where the streamlines go.  add(user, slot, b, taken) takes the first `taken` streamlines of
 * batch b (their records in id order; the points world mm); the run fills that slot's batch
 * again (slots 0 and 1 alternate) only after wait(user, slot) returned, so a sink may go on
 * reading a batch on a thread of its own meanwhile (wait NULL: add is done with it when it
 * returns).  add returns 0, or -1 with an error, which ends the run. */
typedef struct dm_ft_sink {
    int (*add)(void *user, int slot, const dm_ft_batch *b, long taken);
    void (*wait)(void *user, int slot);
    void *user;
} dm_ft_sink;

/* A run: its plan and device, and what it counted. */
typedef struct dm_ft_run {
    dm_ft_plan plan;
    struct dm_ft_gpu *gpu; /* NULL: host threads */
    int threads;           /* the host's (o->threads, or every core) */
    int use_double;
    dm_part part;                   /* --part K/N (n 0: the whole run) */
    unsigned long long next_id;     /* seed ids [plan.id_first, next_id) tracked */
    unsigned long long kept;        /* streamlines handed to the sink */
    unsigned long long total_count; /* accepted + rejected streamlines (tckgen's total_count) */
    unsigned long long verdicts[DM_FT_NVERDICT];
    unsigned long long ends[DM_FT_NEND], truncations, evals, points;
    double length_sum;              /* of the streamlines kept, mm */
    int interrupted;                /* a signal stopped tracking (what was kept is whole) */
    double seconds_load, seconds_compile, seconds_track, seconds_tracing;
} dm_ft_run;

/* Builds the plan from the inputs (read here, not kept) and opens the GPU when o asks for it.
 * 0, or -1 with one line naming the option or the image; dm_ft_run_close in either case. */
int dm_ft_run_open(dm_ft_run *r, const dm_fodtrack_options *o, const dm_ft_inputs *in);

/* Tracks until --select streamlines are kept or the seeds are spent, handing each batch to the
 * sink (in id order: the same streamlines whatever the device's batches or threads).  Progress
 * goes to bar (the command's line on stderr) or to watch (a caller's callbacks; stage
 * "track"), either may be NULL.  A signal stops it at the batch under way: r->interrupted set,
 * what the sink has is whole, and 0 returned (tckgen keeps what it tracked).  A cancel through
 * watch returns -1 with "cancelled"; any other failure -1 with its error. */
int dm_ft_run_track(dm_ft_run *r, const dm_ft_sink *sink, dm_progress *bar, dm_watch *watch);

/* The run's results in provenance.json (algorithm, the resolved options, the counts of every
 * verdict and termination, the seconds). */
void dm_ft_run_provenance(const dm_ft_run *r, dm_provenance *prov);

void dm_ft_run_close(dm_ft_run *r);

#endif
