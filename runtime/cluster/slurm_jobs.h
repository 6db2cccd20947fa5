/* What slurm.c (writing and submitting the jobs) and slurm_status.c (reading them back)
 * share: the stage table WORK/slurm/stages.tsv, one submission, a command's output. */
#ifndef DIMOC_SLURM_JOBS_H
#define DIMOC_SLURM_JOBS_H

enum { DM_SLURM_MAX_TASKS = 1000 };

typedef struct dm_slurm_stage {
    char id[128]; /* "03-grid": the script STAGE.sbatch, the logs, the state files */
    int ntasks;   /* 0: one job; N: an array of parts 1..N */
} dm_slurm_stage;

/* Reads DIR/slurm/stages.tsv ("ID\tNTASKS" lines) into a malloc'd array; its length, or -1
 * with dm_last_error(). */
int dm_slurm_read_stages(const char *dir, dm_slurm_stage **stages);

/* Runs argv (argv[0] looked up in PATH), its stdout and stderr into *output (malloc'd, NUL
 * ended, trailing newlines dropped).  The exit status, or -1 when it cannot run. */
int dm_slurm_capture(char *const argv[], char **output);

/* `sbatch --parsable [--dependency=afterok:AFTER] [--array=TASKS] SCRIPT`: the job id into
 * jobid (at least 32 bytes).  0, or -1 with sbatch's own message as the error. */
int dm_slurm_sbatch(const char *script, const char *after, const char *tasks, char *jobid);

/* Appends "ID\tJOBID\tTASKS" to DIR/slurm/jobs.tsv (TASKS "-" for a job that is no array). */
int dm_slurm_record(const char *dir, const char *id, const char *jobid, const char *tasks);

#endif
