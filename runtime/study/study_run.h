/* The participant level of `dimoc bids`: every (subject, session) of a BIDS dataset through
 * one pipeline, in ONE process (docs/studies.md).
 *
 * The pipeline's script runs in its plan phase once, for the first run, before any work
 * (pipelines/lib/flags.bash records its dimoc commands, DIMOC_BIDS=1: cascades as one command;
 * a failing plan refuses the study in one line); the other runs get that plan with their own
 * paths in place (checked once against the script's own plan of the second run; csd and
 * tractography have their stages built in, study_plan.h).  Each command runs in this process
 * through the caller's `exec` (the command table lives in cli/, which the library does not
 * call).  While one run fits, the next run's DWI is read on a thread (dm_volume_preload: every
 * command of the run reads it from there, the last one taking it), and the previous unit's
 * closing work (the script's finish phase, bash), derivatives, pictures and qc.json are made
 * on another (study_outputs.h).
 *
 * A unit's outputs appear whole or not at all: they are written into OUTPUT_DIR/.sub-X[_ses-Y]
 * .tmp.PID and renamed into place at the end (a session's folder into its subject's folder,
 * its pictures into sub-X/figures/).  A unit complete already (its folder with every run's
 * qc.json) is skipped; the leftovers of killed runs are removed first.  A failing unit is
 * reported in one line and the others go on; SIGINT/SIGTERM remove the unit under way. */
#ifndef DIMOC_STUDY_RUN_H
#define DIMOC_STUDY_RUN_H

/* Runs one dimoc command line (argv[0] the command: "fit", "dti", ...) in this process;
 * returns its exit status, the error in dm_last_error() when not 0. */
typedef int (*dm_study_exec_fn)(int argc, char **argv, void *ctx);

typedef struct dm_study_options {
    const char *bids_dir, *output_dir;
    const char *pipeline; /* its name */
    const char *script;   /* pipelines/NAME.sh; NULL for csd and tractography */
    char *const *args;    /* the pipeline's and fit options as words ("--name" [value]) */
    int nargs;
    const char *const *subjects; /* labels asked for (none: all) */
    int nsubjects;
    const char *const *sessions;
    int nsessions;
    const char *program;      /* dimoc's absolute path: the scripts' phases run it */
    const char *version;      /* dimoc's */
    const char *command_line; /* for dataset_description.json */
    int threads;              /* of the masks dimoc makes (0: all cores) */
    dm_study_exec_fn exec;
    void *exec_ctx;
    /* Writes a command leaves running after it returns (a fit's last maps), or NULL: take hands
     * over those started since the last take, join waits for them (0, or -1 with
     * dm_last_error()).  A run's later command starts after its earlier ones' writes; its last
     * command's are joined on the writer thread, beside the next run's fits. */
    void *(*take_writes)(void);
    int (*join_writes)(void *writes);
} dm_study_options;

/* Progress goes to stdout, one line per unit; the stages' own output (progress lines, their
 * messages) to the run's log, RUN_FOLDER/dimoc.log (OUTPUT_DIR/logs/P.log when the run
 * failed).  0 when every unit succeeded (or was complete already), 1 when any failed (each
 * named in one line on stderr, and listed again at the end); -1 with dm_last_error() when the run is refused before
 * any work (BIDS_DIR not a dataset, OUTPUT_DIR not writable or another pipeline's).  After a
 * stop request the unit under way is removed and -1 returned with the stop's error. */
int dm_study_participant(const dm_study_options *o);

/* 1 when the unit's folder under output_dir holds every run's qc.json (written last, inside
 * the temporary folder renamed whole into place). */
struct dm_bids_unit;
int dm_study_unit_complete(const char *output_dir, const struct dm_bids_unit *u);

#endif
