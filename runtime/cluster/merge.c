/* dimoc merge: the part folders checked against each other, then each file joined by the
 * rule its manifest names (cluster/part.h) through merge_kinds.h: NIfTI images (merge_image.c),
 * .tck files (merge_tck.c), text and bytes (merge_text.c). */
#include "cluster/merge.h"
#include "cluster/merge_kinds.h"
#include "cluster/part.h"
#include "cluster/part_manifest.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/json.h"
#include "util/outdir.h"
#include "util/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_files(const dm_part_manifest *a, const dm_part_manifest *b)
{
    if (a->nfiles != b->nfiles) return 0;
    for (int i = 0; i < a->nfiles; i++)
        if (strcmp(a->files[i].name, b->files[i].name) || a->files[i].how != b->files[i].how)
            return 0;
    return 1;
}

/* parts[k-1] = the manifest of part k; every part present once, of one run. */
static int order_parts(dm_part_manifest *m, int ndirs, dm_part_manifest ***sorted)
{
    int n = m[0].n, voxels = 0;
    dm_part_manifest **parts = calloc((size_t)n, sizeof *parts);
    *sorted = parts;
    for (int i = 0; i < ndirs; i++) {
        if (m[i].n != n)
            return dm_set_error("%s is part %d of %d, but %s is of %d parts", m[i].dir, m[i].k,
                                m[i].n, m[0].dir, n);
        if (strcmp(m[i].command, m[0].command) || !same_files(&m[i], &m[0]))
            return dm_set_error("%s and %s are parts of different runs (command: %s / %s)",
                                m[0].dir, m[i].dir, m[0].command, m[i].command);
        if (parts[m[i].k - 1])
            return dm_set_error("%s and %s both hold part %d of %d", parts[m[i].k - 1]->dir,
                                m[i].dir, m[i].k, n);
        parts[m[i].k - 1] = &m[i];
    }
    for (int k = 0; k < n; k++)
        if (!parts[k])
            return dm_set_error("part %d of %d is missing: no folder given holds it finished "
                                "(run it again with --part %d/%d)",
                                k + 1, n, k + 1, n);
    for (int i = 0; i < m[0].nfiles; i++) voxels |= m[0].files[i].how == DM_MERGE_VOXELS;
    for (int k = 0; voxels && k < n; k++) {
        size_t expect = k ? parts[k - 1]->voxel_end : 0;
        if (parts[k]->nvox != parts[0]->nvox || parts[k]->voxel_first != expect ||
            parts[k]->voxel_end < expect || (k == n - 1 && parts[k]->voxel_end != parts[k]->nvox))
            return dm_set_error("%s: its voxel range [%zu, %zu) does not follow part %d's",
                                parts[k]->dir, parts[k]->voxel_first, parts[k]->voxel_end, k);
    }
    return 0;
}

static int write_provenance(dm_part_manifest *const parts[], int n, const char *dir)
{
    dm_provenance p;
    dm_provenance_begin(&p, "merge");
    dm_provenance_str(&p, DM_PROV_OPTION, "parts_command", parts[0]->command);
    dm_provenance_num(&p, DM_PROV_RESULT, "parts", n);
    dm_provenance_num(&p, DM_PROV_RESULT, "files", parts[0]->nfiles);
    /* the folders, as many as the record holds (every part's own record is kept below) */
    for (int k = 0; k < n && k < DM_PROV_MAX - 8; k++) {
        char key[32];
        snprintf(key, sizeof key, "part%d", k + 1);
        dm_provenance_str(&p, DM_PROV_INPUT, key, parts[k]->dir);
    }
    char *path = dm_path_join(dir, "provenance.json");
    int rc = dm_provenance_write(&p, path);
    free(path);
    dm_provenance_free(&p);
    /* each part's own record beside it: parts/provenance.K.json */
    char *sub = dm_path_join(dir, "parts");
    if (rc == 0) rc = dm_mkdir_p(sub);
    for (int k = 0; k < n && rc == 0; k++) {
        size_t len;
        char *text = dm_merge_read_part_file(parts[k], "provenance.json", &len);
        if (!text) continue; /* a command without one */
        char name[48];
        snprintf(name, sizeof name, "provenance.%d.json", k + 1);
        char *to = dm_path_join(sub, name);
        rc = dm_merge_write_bytes(to, text, len);
        free(to);
        free(text);
    }
    free(sub);
    return rc;
}

int dm_merge_parts(char *const dirs[], int ndirs, const char *out, int quiet)
{
    if (ndirs < 1) return dm_set_error("merge: give the part folders to join");
    dm_part_manifest *m = calloc((size_t)ndirs, sizeof *m);
    dm_part_manifest **parts = NULL;
    int rc = 0, read = 0;
    for (; read < ndirs && rc == 0; read++) rc = dm_part_manifest_read(dirs[read], &m[read]);
    if (rc == 0) rc = order_parts(m, ndirs, &parts);
    dm_outdir od = {0};
    if (rc == 0) rc = dm_outdir_begin(&od, out, DM_OUTDIR_REPLACE);
    int n = m[0].n, began = rc == 0;
    dm_progress *prog = rc == 0 && !quiet ? dm_progress_start("merge", m[0].nfiles, "files") : 0;
    /* One file after another: the reads and writes of each are spread over all cores by the
     * blocks of its gzip members (io/gz_blocks.h), which keeps every core busy on the large
     * 4D files where parallel files would leave a few threads with most of the work. */
    for (int i = 0; rc == 0 && i < m[0].nfiles; i++) {
        if (dm_stop_requested()) {
            rc = dm_stop_error();
            break;
        }
        const dm_part_file *f = &m[0].files[i];
        char *to = dm_path_join(od.path, f->name);
        switch (f->how) {
        case DM_MERGE_VOXELS: rc = dm_merge_voxels(parts, n, f->name, to); break;
        case DM_MERGE_SUM: rc = dm_merge_sum(parts, n, f->name, to); break;
        case DM_MERGE_SAME: rc = dm_merge_same(parts, n, f->name, to); break;
        case DM_MERGE_TCK: rc = dm_merge_tck(parts, n, f->name, to, out); break;
        case DM_MERGE_LINES: rc = dm_merge_lines(parts, n, f->name, to); break;
        case DM_MERGE_CONCAT: rc = dm_merge_concat(parts, n, f->name, to); break;
        case DM_MERGE_COUNTS: rc = dm_merge_counts(parts, n, f->name, to); break;
        case DM_MERGE_DOT: rc = dm_merge_dot(parts, n, f->name, to); break;
        case DM_MERGE_MEAN: rc = dm_merge_mean(parts, n, f->name, to); break;
        case DM_MERGE_PART: break; /* read by another file's merge */
        }
        free(to);
        if (prog) dm_progress_add(prog, 1);
    }
    if (prog) dm_progress_finish(prog, NULL);
    if (rc == 0) rc = write_provenance(parts, n, od.path);
    if (began) {
        if (rc == 0)
            rc = dm_outdir_commit(&od);
        else
            dm_outdir_abort(&od);
    }
    for (int i = 0; i < read; i++) dm_part_manifest_free(&m[i]);
    free(m);
    free(parts);
    return rc;
}
