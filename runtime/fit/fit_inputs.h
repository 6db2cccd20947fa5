/* A fit's inputs as arrays, and the two halves of planning one: the reader (fit_read.c: the
 * command's files into arrays) and the builder (fit_plan.c: arrays into a dm_problem).  The
 * command line is reader + builder + the engine (fit_run.c); the C API hands its caller's
 * arrays to the builder and takes the maps back in memory (dm_fit_run_memory). */
#ifndef DIMOC_FIT_INPUTS_H
#define DIMOC_FIT_INPUTS_H

#include "fit/fit.h"
#include "util/progress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* Element types of the arrays read in place. */
enum { DM_ARRAY_F32 = 0, DM_ARRAY_F64 = 1, DM_ARRAY_U8 = 2 };

/* An array read in place: element (i0, i1, ..) at (const char *)data + i0 * stride[0] +
 * i1 * stride[1] + .. (bytes, of any sign), numpy's layout.  ndim 0: one value at data. */
typedef struct dm_array {
    const void *data; /* NULL: not given */
    int type;         /* DM_ARRAY_* */
    int ndim;
    size_t shape[4];
    ptrdiff_t stride[4];
} dm_array;

/* A view of an image as read (x fastest, then y, z, volume; doubles): 3D when it has one
 * volume, else 4D. */
dm_array dm_array_of_volume(const dm_volume *v);
/* Element `offset` bytes past a's data, as a double. */
double dm_array_at(const dm_array *a, ptrdiff_t offset);

/* A named input: a per-voxel input or a start (--voxel, --init NAME=VALUE|MAP), or a
 * per-measurement input's rows (--measure, a --scheme column).  `text` is the value as given
 * (a number, a path), for messages. */
typedef struct dm_fit_item {
    char name[DM_NAME_MAX];
    char text[512];
    dm_array map;     /* ndim 0: one value for every voxel */
    dm_volume owned;  /* a map read from a file (map points into it) */
    double *rows;     /* rows read from a file (map points into them) */
} dm_fit_item;

typedef struct dm_fit_items {
    dm_fit_item *item;
    int n;
    unsigned from_dir; /* bit i: item i came from --init-from's folder (applied first) */
} dm_fit_items;

void dm_fit_items_free(dm_fit_items *it);

/* Splits "a=1,2,b=x;c=y" into NAME=VALUES items: a token holding '=' starts a new item, a
 * token without one continues the previous item's value list.  Calls fn for each item; the
 * first that fails ends it (its -1).  `what` names the option in messages. */
typedef int (*dm_fit_item_fn)(void *ctx, const char *name, const char *values);
int dm_fit_for_each_item(const char *spec, const char *what, dm_fit_item_fn fn, void *ctx);

/* Everything a fit reads, as arrays.  The names are those messages give: the files of the
 * command line, the arguments of the C API. */
typedef struct dm_fit_inputs {
    dm_array data;   /* X x Y x Z x M */
    dm_array mask;   /* X x Y x Z: the voxels where it is non-zero and not NaN; data NULL: all */
    const char *data_name, *mask_name;
    /* The gradient table, when the model reads b-values or directions: M b-values, M x 3
     * directions in FSL's bvecs frame (unit where b > 0) */
    const double *b, *g;
    const char *b_name, *g_name;
    dm_fit_items measures; /* the other per-measurement inputs, by the model's name: M x width */
    dm_fit_items voxel;    /* per-voxel inputs (--voxel), applied in order over the defaults */
    const char *measure_option, *voxel_option; /* "--measure", "--voxel": for messages */
} dm_fit_inputs;

/* What the reader made for the builder: the inputs and what they point into. */
typedef struct dm_fit_files {
    dm_fit_inputs in;
    dm_volume mask;
    double *b, *g;
} dm_fit_files;

/* The reader: r's model into *mi, its data (into p_data: the image with its geometry, which
 * the outputs are written with), mask, gradient table, --measure files, --scheme columns and
 * --voxel maps into *f.  0, or -1 with dm_last_error() naming the file. */
int dm_fit_read(const dm_fit_request *r, dm_model_info *mi, dm_volume *data, dm_fit_files *f);
void dm_fit_files_free(dm_fit_files *f);
/* The reader of a stage's starts: --init-from's maps (from_dir), then --init's values and maps
 * (their grid checked against `grid`).  0, or -1 with dm_last_error(). */
int dm_fit_read_starts(const dm_fit_request *r, const dm_model_info *mi, const dm_volume *grid,
                       dm_fit_items *starts);
/* The reader of the gradient table alone, FSL's files (for `dimoc simulate`, which has no
 * data): --measure files and --scheme columns too.  f->in.b/g set when the model reads them. */
int dm_fit_read_protocol(const dm_model_info *mi, const char *bvals, const char *bvecs,
                         const char *measure_spec, const char *scheme, int nvol, dm_fit_files *f);

/* The builder: the model's measurement rows (M x measure_width) and b-values (NULL where the
 * model reads none) from in's table and rows, checked.  0, or -1 with dm_last_error(). */
int dm_fit_measurements(const dm_model_info *mi, const dm_fit_inputs *in, int M, double **meas,
                        double **bvals);
/* The builder: p from mi (copied), the arrays of `in` (read, not kept) and r's options that the
 * inputs take (--part).  p->data holds the grid's sizes (and `geometry`, which p takes over;
 * NULL: none, for arrays).  0, or -1 with dm_last_error(). */
int dm_problem_build(const dm_fit_request *r, const dm_model_info *mi, const dm_fit_inputs *in,
                     dm_volume *geometry, dm_problem *p);
/* dm_problem_stage with the starts given as items (NULL: none) instead of read from r->init
 * and r->init_from. */
int dm_problem_stage_items(const dm_fit_request *r, const double *prev, const dm_fit_items *starts,
                           const char *init_option, dm_problem *p);

/* Progress and cancellation of a fit in memory: the run's watch (util/progress.h: the caller's
 * callbacks, on the thread that made it, between pieces of work) with the count of the
 * stage's pieces, which the workers add to.  Without a watch (the command) a fit stops on a
 * signal (util/interrupt.h). */
typedef struct dm_fit_watch {
    dm_watch base;
    atomic_long done; /* pieces of the stage done */
    long total;
} dm_fit_watch;

void dm_fit_watch_init(dm_fit_watch *w, void (*progress)(void *, const char *, double),
                       int (*cancel)(void *), void *user);
/* A new stage of work of `total` pieces, reported at 0, the stage before it at 1 (w NULL:
 * nothing). */
void dm_fit_watch_stage(dm_fit_watch *w, const char *stage, long total);
/* The current stage reported at its end. */
void dm_fit_watch_done(dm_fit_watch *w);
/* n more pieces done, from any thread; on the owner's, the callbacks when due. */
void dm_fit_watch_add(dm_fit_watch *w, long n);
/* The callbacks now if due (the owner's thread). */
void dm_fit_watch_poll(dm_fit_watch *w);
/* 1 when the fit is to stop: a signal, or the watch's caller asked. */
int dm_fit_stopping(dm_fit_watch *w);
/* Records why it stopped ("cancelled", or the signal) and returns -1. */
int dm_fit_stop_error(const dm_fit_watch *w);

/* One map of a fit in memory, on the data's grid: nvox x nt values, x fastest, then y, z,
 * volume (the order the command writes). */
enum {
    DM_MAP_PARAMETER,
    DM_MAP_STD,
    DM_MAP_SAMPLES,
    DM_MAP_OUTPUT,
    DM_MAP_DISPERSION,
    DM_MAP_IC,
    DM_MAP_PREDICTED,
    DM_MAP_STATUS,
};
typedef struct dm_fit_map {
    char name[160]; /* the stem of the file the command writes: S0, S0_sd, dyads1, status */
    int kind;       /* DM_MAP_* */
    int nt;
    int type; /* DM_OUT_FLOAT32, DM_OUT_FLOAT64 (--out-type), DM_OUT_UINT8 (the status) */
    void *data;
} dm_fit_map;

typedef struct dm_fit_maps {
    dm_fit_map *map;
    int n, cap;
} dm_fit_maps;
void dm_fit_maps_free(dm_fit_maps *m);

/* A run in memory: one stage of r (r->data and the other paths name the inputs in messages;
 * r->out is not used), on inputs already made, its maps and provenance handed back. */
typedef struct dm_fit_memory {
    const dm_model_info *mi;
    const dm_fit_inputs *in;
    const dm_fit_items *starts; /* the starts (--init), or NULL */
    const char *init_option;    /* "--init" or the API's name of it, for messages */
    dm_fit_watch *watch;        /* or NULL */
    dm_fit_maps maps;           /* out: every map, the status last */
    char *provenance;           /* out: provenance.json's text (malloc'd) */
} dm_fit_memory;

/* 0, or -1 with dm_last_error() (after a cancel: dm_watch_cancelled of the watch). */
int dm_fit_run_memory(const dm_fit_request *r, dm_fit_memory *mem);

/* ---- The signals of a fit's voxels, gathered from its image (volume by volume in memory)
 * into one row of M values a voxel (fit_plan.c): as the fit is planned, or ahead of it on
 * another thread while the process does something else (`dimoc bids`: the next run's, while
 * this one fits). */

/* Reads the 4D image `data` into io/volume.h's read-ahead cache and gathers the signals of the
 * voxels of `mask` (its non-zero, not-NaN ones), kept for the fit that reads the same file
 * next (dm_fit_signal_ahead_take).  Meant for a thread of its own; thread-safe.  Nothing is
 * kept when the files do not go together or cannot be read: the fit reads them and says why. */
void dm_fit_signal_ahead(const char *data, const char *mask);

/* Inside a fit's planning, with p->index, nfit, M and the grid set: when the signals gathered
 * ahead are those of `a` (the image read from file `data_name`, handed over by the read-ahead
 * cache) for exactly these voxels, p->y takes them (an io/bigalloc.h buffer of
 * dm_problem_signal_bytes) and p->status_data their statuses: 1.  Else 0, nothing changed.
 * Waits for signals of that file still being gathered. */
int dm_fit_signal_ahead_take(const dm_array *a, const char *data_name, dm_problem *p);

/* Lets go of the signals gathered ahead and not taken (waiting for any being gathered). */
void dm_fit_signal_ahead_clear(void);

#endif
