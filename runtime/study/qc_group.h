/* The group level of the BIDS App (`dimoc bids BIDS_DIR OUTPUT_DIR group`): the participant
 * level's per-run quality files (sub-X/[ses-Y/]dwi/P_qc.json) gathered into one table,
 * OUTPUT_DIR/group/dimoc_qc.tsv (with its column descriptions, dimoc_qc.json), robust z-scores
 * of every figure across the runs of one pipeline, and an HTML page of the table and each
 * run's quick-look pictures, OUTPUT_DIR/group/dimoc_report.html. */
#ifndef DIMOC_STUDY_QC_GROUP_H
#define DIMOC_STUDY_QC_GROUP_H

typedef struct dm_study_group_options {
    const char *pipeline; /* NULL: every pipeline found */
    double z_limit;       /* robust z beyond which a subject is marked; 0: the default, 3.5 */
} dm_study_group_options;

#define DM_STUDY_Z_LIMIT_DEFAULT 3.5

/* Reads every qc file under output_dir and writes the group files (all together, through
 * temporary names and renames).  A malformed qc file is reported on stderr in one line
 * naming it, and left out; the outputs are then written from the others and the call
 * returns -1, so that the exit status says that some failed.  0, or -1 with dm_last_error()
 * (nothing written when no qc file could be read).  o may be NULL (every pipeline, 3.5). */
int dm_study_group(const char *output_dir, const dm_study_group_options *o);

#endif
