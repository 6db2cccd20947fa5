/* What `dimoc bids` writes for one run of a pipeline, into its unit's temporary folder: the
 * final stage's maps under BIDS derivative names with their JSON sidecars, the mask used, the
 * run's quality figures (P_qc.json) and quick-look pictures (render/, as `dimoc view` draws
 * them); and the output folder's dataset_description.json.  docs/studies.md lists the names. */
#ifndef DIMOC_STUDY_OUTPUTS_H
#define DIMOC_STUDY_OUTPUTS_H

/* OUTPUT_DIR/dataset_description.json: written once (atomically) when absent; one of another
 * pipeline or dimoc version is refused (-1, "... holds the outputs of ..."); one that is no
 * dimoc derivative too.  0, or -1 with dm_last_error(). */
int dm_study_description(const char *output_dir, const char *pipeline, const char *version,
                         const char *command_line, const char *bids_root);

/* One run's outputs, after its stages ran. */
typedef struct dm_study_run_out {
    const char *subject, *session; /* labels; session NULL */
    const char *prefix;            /* the run's entities: "sub-01_ses-1_run-1" */
    const char *pipeline;
    const char *model;       /* the final stage's model ("noddi_dti"; csd: "csd") */
    const char *final_dir;   /* the final stage's --out: its maps, status, provenance.json */
    const char *tracks;      /* a tractogram the pipeline made (NULL: none) */
    const char *dwi_dir;     /* where the derivatives go: TMP/dwi */
    const char *figures_dir; /* where the pictures go: TMP/figures */
    const char *mask;        /* the mask used (a file) */
    const char *mask_source; /* the dataset's mask relative to BIDS_DIR; NULL: made by dimoc */
    const char *sources[4];  /* dwi, bval, bvec, mask: paths relative to BIDS_DIR (or to
                              * OUTPUT_DIR for a mask dimoc made) */
    double seconds_read;     /* the run's mask and inputs, before its stages */
    double seconds_stages;   /* the stages whole: the plan and every command */
    double seconds_plan;     /* of which the plan (bash's plan phase, or the plan reused) */
    double seconds_finish;   /* the pipeline's closing work (its finish phase), before the write */
    double seconds_fit;      /* the stages' fits alone (their provenance's timings_seconds.fit) */
    double started;          /* dm_study_now() at the run's start */
} dm_study_run_out;

/* Links the maps, writes the sidecars, the mask's picture and sidecar, the maps' pictures and
 * P_qc.json (last).  0, or -1 with dm_last_error() naming the file (a full disk). */
int dm_study_write_run(const dm_study_run_out *r);

/* The derivative label of a name: its letters and digits only ("noddi_dti" -> "noddidti").
 * Writes into buf (size n). */
void dm_study_label(const char *name, char *buf, int n);

/* Monotonic seconds. */
double dm_study_now(void);

#endif
