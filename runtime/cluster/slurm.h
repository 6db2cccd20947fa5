/* A pipeline on a SLURM cluster (`dimoc pipeline NAME ... --slurm`): its plan (the dimoc
 * commands pipelines/lib/flags.bash recorded, in order) becomes one sbatch job per stage, each
 * depending afterok on the one before.  A command that takes --part (fit, csd, track) becomes
 * a job array of N parts writing WORK/slurm/parts/STAGE/part-K, then a job that joins them
 * (`dimoc merge`) into the command's own --out and removes the parts; the last job runs the
 * pipeline's closing shell work and puts the work folder in place as --out.
 *
 * Everything lives in the work folder WORK = DIR/.BASE.slurm beside --out = DIR/BASE (the
 * pipeline's all-or-nothing temporary folder, which the last job renames to --out): job
 * scripts WORK/slurm/STAGE.sbatch, logs WORK/slurm/logs/STAGE[_K].log, the stages
 * (stages.tsv), every submission (jobs.tsv: stage, job id, tasks) and each job's exit status
 * (state/STAGE_K.rc, written by the job itself: a cluster without accounting still knows
 * which part failed).  Status and resubmission read them back, from WORK or, once the run is
 * complete, from --out/slurm. */
#ifndef DIMOC_SLURM_H
#define DIMOC_SLURM_H

#include <stdio.h>

typedef struct dm_slurm_opts {
    const char *partition, *time, *account, *gpus_per_task; /* NULL: not given */
    const char *cpu_partition; /* the jobs that use no GPU (NULL: partition's) */
    const char *cpus_per_task; /* every job's (NULL: the site's default) */
    const char *setup;         /* a file of shell lines every job sources first (NULL: none) */
    int parts;                 /* parts per array (1: no arrays, no merges) */
    int dry_run;               /* print the scripts, submit nothing */
} dm_slurm_opts;

/* The work folder of an output folder: "DIR/.BASE.slurm" for out "DIR/BASE", made absolute
 * against the current folder.  malloc'd; NULL with dm_last_error(). */
char *dm_slurm_work_dir(const char *out);
/* out made absolute (trailing '/' dropped), malloc'd. */
char *dm_slurm_abs_path(const char *path);

/* Writes the job scripts of plan_path (lines of pipelines/lib/flags.bash's plan phase) under
 * work/slurm and submits them with sbatch, or prints them on `to` with o->dry_run (writing
 * nothing).  program: dimoc's absolute path; name: the pipeline; finish_cmd: the last job's
 * command line (shell-quoted: `dimoc pipeline NAME ...` in its finish phase); out: --out,
 * absolute.  0, or -1 with dm_last_error() (the jobs already submitted are cancelled). */
int dm_slurm_submit(const char *plan_path, const char *work, const char *out, const char *program,
                    const char *name, const char *finish_cmd, const dm_slurm_opts *o, FILE *to);

/* Prints one line per stage of the run whose --out is `out`, and for every failed part its
 * state and log.  Returns 0 (complete), 1 (a stage failed), 3 (under way), or -1 with
 * dm_last_error(). */
int dm_slurm_status(const char *out, FILE *to);
/* Resubmits the first unfinished stage's failed parts (or the failed job) and every stage
 * after it, cancelling their earlier jobs.  0, or -1 with dm_last_error() (nothing to
 * resubmit: the run is complete or still under way). */
int dm_slurm_resubmit(const char *out, FILE *to);

#endif
