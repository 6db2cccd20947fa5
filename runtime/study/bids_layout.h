/* A BIDS dataset's diffusion data as `dimoc bids` processes it: every
 * sub-X/[ses-Y/]dwi/ *_dwi.nii[.gz] file with its .bval, .bvec and .json found by the BIDS
 * inheritance principle (the same folder, then the session's, the subject's and the dataset's
 * top folder: the deepest file whose entities are all the run's wins), and a brain mask from
 * BIDS_DIR/derivatives/ where the dataset has one.  The unit of work is one (subject, session):
 * all its runs.  Faults of one run (a missing or mismatched gradient file, a 3D "dwi", two
 * files of one name) are kept with its unit as one line each, so that the other units go on. */
#ifndef DIMOC_STUDY_BIDS_LAYOUT_H
#define DIMOC_STUDY_BIDS_LAYOUT_H

typedef struct dm_bids_run {
    char *prefix; /* the dwi file's name without _dwi.nii[.gz]: "sub-01_ses-1_acq-b1000_run-1" */
    char *dwi, *bval, *bvec; /* absolute paths (bval, bvec NULL when missing: see error) */
    char *json;              /* the nearest sidecar (NULL: none) */
    char *mask;              /* a dataset mask from derivatives/ (NULL: none, dimoc makes one) */
    int nvol;                /* volumes of the DWI */
    char *error;             /* "FILE: what is wrong" (NULL: none found) */
} dm_bids_run;

typedef struct dm_bids_unit {
    char *subject; /* the label, "01" */
    char *session; /* the label, "1"; NULL for a subject without sessions */
    dm_bids_run *runs;
    int nruns;
    char *error; /* a fault of the unit itself (no dwi data); NULL: none */
} dm_bids_unit;

typedef struct dm_bids_layout {
    char *root; /* BIDS_DIR, absolute */
    dm_bids_unit *units;
    int nunits;
} dm_bids_layout;

/* Reads BIDS_DIR: its dataset_description.json must be a JSON object (else -1, nothing else
 * done), then the units of the subjects (labels with or without "sub-"; none: every
 * subject) and sessions asked for (none: every session).  A subject or session asked for that
 * has no dwi data is a unit of its own with that error.  skip_dir: a folder the mask search
 * leaves out (the output folder, when it lies inside derivatives/; NULL: none).  0, or -1
 * with dm_last_error(). */
int dm_bids_discover(const char *bids_dir, const char *const *subjects, int nsubjects,
                     const char *const *sessions, int nsessions, const char *skip_dir,
                     dm_bids_layout *layout);
void dm_bids_layout_free(dm_bids_layout *layout);

/* "sub-01" or "sub-01 ses-1", for messages (malloc'd). */
char *dm_bids_unit_name(const dm_bids_unit *u);
/* The unit's folder under an output folder: "sub-01" or "sub-01/ses-1" (malloc'd). */
char *dm_bids_unit_rel(const dm_bids_unit *u);
/* A label without its "sub-"/"ses-" prefix (a pointer into label). */
const char *dm_bids_label(const char *label, const char *prefix);

#endif
