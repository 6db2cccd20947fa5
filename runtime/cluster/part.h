/* One part of a job split for a cluster: `--part K/N` runs the K-th of N shares (K from 1) and
 * writes, beside the usual outputs, a manifest part.json that says which share it holds and how
 * `dimoc merge` joins each file with the other parts' into what one process would have written.
 *
 * Shares are contiguous ranges of the job's natural order (the fitted voxels in index order, the
 * seeds in id order), so every random stream, keyed by voxel index or seed id, is the same
 * whatever N is, and the merged bytes equal a single run's. */
#ifndef DIMOC_PART_H
#define DIMOC_PART_H

#include <stddef.h>

typedef struct dm_part {
    int k, n; /* the K-th of N, K from 1; n == 0: the whole job */
} dm_part;

/* "K/N" with 1 <= K <= N; NULL or "" gives the whole job.  0, or -1 with dm_last_error()
 * naming --part. */
int dm_part_parse(const char *text, dm_part *p);

/* The share [*first, *end) of `total` items in order (the whole [0, total) when p->n == 0). */
void dm_part_range(const dm_part *p, size_t total, size_t *first, size_t *end);

/* Keeps the share of a list of `*count` ascending voxel indices (of an image of nvox voxels) in
 * place, and gives the linear indices whose outputs the part owns: from its first voxel to the
 * next part's first (from 0 for the first part, to nvox for the last), so that the parts' ranges
 * tile the image, voxels outside the list included. */
void dm_part_select_voxels(const dm_part *p, size_t *index, size_t *count, size_t nvox,
                           size_t *own_first, size_t *own_end);

/* How `dimoc merge` joins a file of the parts. */
enum {
    DM_MERGE_VOXELS = 1, /* NIfTI: each voxel from the part whose voxel range holds it */
    DM_MERGE_SUM,        /* NIfTI: the parts' values summed voxel by voxel */
    DM_MERGE_SAME,       /* identical in every part (a response computed from the whole data) */
    DM_MERGE_TCK,        /* .tck: the streamlines of part 1, then part 2, ...; counts summed */
    DM_MERGE_LINES,      /* text: the lines of part 1, then part 2, ... */
    DM_MERGE_CONCAT,     /* any file: the bytes of part 1, then part 2, ... (commit's dictionary) */
    DM_MERGE_COUNTS,     /* text of whole numbers (waytotal, counts .csv): summed number by
                            number; the text between them the same in every part */
    DM_MERGE_DOT,        /* sparse "row col count" lines (fdt_matrix*.dot): counts summed per
                            (row, col), sorted, the "rows cols 0" last line where no entry is */
    DM_MERGE_MEAN,       /* a .csv of means (mean_length.csv): from each part's DM_MERGE_PART
                            file "." NAME ".sums" (counts and exact sums per entry) */
    DM_MERGE_PART,       /* a part's own file that another file's merge reads: not copied */
};

/* A rule: files whose name matches `pattern` (fnmatch) merge by `how`; the first match wins. */
typedef struct dm_part_rule {
    const char *pattern;
    int how;
} dm_part_rule;

/* The manifest's facts besides the files. */
typedef struct dm_part_info {
    const char *command; /* the command line without --part and --out, the same in all parts */
    size_t voxel_first;  /* DM_MERGE_VOXELS: the linear voxel indices this part owns; the */
    size_t voxel_end;    /* parts' ranges tile [0, nvox) in order of K */
    size_t nvox;         /* the image's voxel count (0: no voxel-merged file) */
} dm_part_info;

/* Writes DIR/part.json listing every file in DIR (but provenance.json) with its rule; a file no
 * rule covers, or a folder, is an error.  Call it last, into the temporary output folder, so that
 * a part killed before it ends leaves no manifest.  0, or -1 with dm_last_error(). */
int dm_part_write(const char *dir, const dm_part *p, const dm_part_info *info,
                  const dm_part_rule *rules, int nrules);

/* The command line of this run without its --part and --out options and their values, a path
 * inside --out written as "{out}/..." (malloc'd), for dm_part_info.command. */
char *dm_part_command(void);

/* The command line of this run as one run without --part writes it into a file (a .tck
 * header's command_history): --part and its value left out, and --out's value (or the whole
 * "--out=DIR" word) replaced by DM_PART_OUT_MARK, which `dimoc merge` replaces by its own --out
 * (the word as dm_shell_quote_argv quotes it).  Without --part, the command line as it is.
 * malloc'd. */
#define DM_PART_OUT_MARK "{dimoc-merge-out}"
#define DM_PART_OUT_EQ_MARK "{dimoc-merge-out=}"
char *dm_part_history(const dm_part *p);

/* The merge's name of a DM_MERGE_ value ("voxels", ...), and back (0 when unknown). */
const char *dm_part_merge_name(int how);
int dm_part_merge_kind(const char *name);

#endif
