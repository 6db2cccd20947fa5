/* `dimoc bids ... participant --slurm`: the units (subject, session) of a study as one SLURM
 * job array, --slurm-batch N units per task, each task running `dimoc bids BIDS_DIR OUTPUT_DIR
 * participant --participant-label ... [--session-label ...]` for its units (so each task pays
 * the program's and the GPU's start once for its batch).  The script and the tasks' logs go to
 * OUTPUT_DIR/.slurm/; sbatch through runtime/cluster/ (slurm_jobs.h). */
#ifndef DIMOC_STUDY_SLURM_H
#define DIMOC_STUDY_SLURM_H

#include <stdio.h>

typedef struct dm_study_slurm_options {
    const char *partition, *time, *account, *gpus_per_task, *cpus_per_task; /* NULL: none */
    const char *setup; /* shell lines every task sources first (NULL: none) */
    int dry_run;       /* print the script, submit nothing, write nothing */
    int batch;         /* units per task */
    const char *program, *pipeline;
    char *const *args; /* the pipeline's options, passed on as they are */
    int nargs;
    const char *const *subjects, *const *sessions;
    int nsubjects, nsessions;
} dm_study_slurm_options;

/* Finds the units still to do (those complete already are left out), writes the array's
 * script and submits it (or prints it with dry_run).  0, or -1 with dm_last_error(). */
int dm_study_slurm_submit(const char *bids_dir, const char *output_dir,
                          const dm_study_slurm_options *o, FILE *to);

#endif
