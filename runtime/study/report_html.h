/* The group report as one self-contained HTML page: the quality table of every run (one table
 * per pipeline, sortable by a small inline script, the figures beyond the z limit marked), the
 * runs beyond it listed first, and each run's quick-look pictures by relative paths from
 * group/ (a picture not there is listed as missing instead of shown broken).  No file is read
 * here: qc_group.c gathers the table and which pictures exist. */
#ifndef DIMOC_STUDY_REPORT_HTML_H
#define DIMOC_STUDY_REPORT_HTML_H

#include <stdio.h>

/* One quick-look picture a run should have: its path from OUTPUT_DIR and whether it is there
 * (a readable PNG). */
typedef struct dm_qc_picture {
    char *path;    /* "sub-01/figures/P_space-dwi_desc-brain_mask.png" */
    char *caption; /* "brain mask", "dti FA" */
    int present;
} dm_qc_picture;

/* One run: its names, one value per figure of the table (NaN: n/a), their robust z (NaN:
 * n/a; +-Inf: the pipeline's MAD is 0 and the value differs from the median). */
typedef struct dm_qc_run {
    char *subject, *session; /* session NULL: none */
    char *run_prefix, *pipeline;
    int pipeline_index; /* into dm_qc_table.pipeline */
    double *value, *z;  /* [n_figures] */
    int n_beyond;       /* figures with |z| > z_limit */
    dm_qc_picture *picture;
    int n_pictures;
} dm_qc_run;

/* The figures every run has, first in the table: voxels_in_mask, fitted, flagged,
 * flagged_fraction, residual_median; then the medians, then seconds_total. */
#define DM_QC_FIXED_FIGURES 5

/* The whole table.  Figures 0..n_figures-1 in column order; is_count[f]: an integer count
 * (printed without a decimal point).  center/spread[p * n_figures + f]: the median and MAD of
 * figure f over pipeline p's runs (NaN when it has no value). */
typedef struct dm_qc_table {
    dm_qc_run *run;
    int n_runs;
    char **figure;
    int *is_count;
    int n_figures;
    char **pipeline;
    int n_pipelines;
    double *center, *spread;
    double z_limit;
    char **skipped; /* "FILE: what is wrong", the qc files left out */
    int n_skipped;
    const char *output_dir; /* as given, shown in the page's heading */
} dm_qc_table;

/* A figure or z as the TSV and the page print it: "n/a" for NaN, "inf"/"-inf", a count as an
 * integer, any other number with 6 significant digits.  Returns buf. */
const char *dm_qc_format(char *buf, size_t size, double v, int is_count);
/* A z-score as printed: 3 decimals, "inf"/"-inf", "n/a". */
const char *dm_qc_format_z(char *buf, size_t size, double z);

/* Writes the page to f; 0, or -1 with dm_last_error() on a write error. */
int dm_qc_report_html(const dm_qc_table *t, FILE *f);

#endif
