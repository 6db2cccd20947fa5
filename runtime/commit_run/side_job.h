/* Work on a thread of its own while the calling one goes on (the stages of `dimoc commit`: the
 * tractogram read while the data are; the GPU's driver, program and kernels made ready while the
 * dictionary and the operator are built; outputs written while the error maps are computed).
 * Without a thread, the work is done at once. */
#ifndef DIMOC_SIDE_JOB_H
#define DIMOC_SIDE_JOB_H

#include <pthread.h>

typedef struct dm_side_job {
    int (*work)(void *arg); /* 0, or -1 with the error set */
    void *arg;
    int rc;
    char error[2048]; /* the work's message (errors are per thread) */
    pthread_t thread;
    int running;
} dm_side_job;

/* Starts work(arg) on a thread (done at once, here, when no thread starts). */
void dm_side_start(dm_side_job *j, int (*work)(void *), void *arg);
/* Waits for the work: its result, its error set in this thread (set_error 0: left as it is,
 * after an error here came first). */
int dm_side_end(dm_side_job *j, int set_error);

#endif
