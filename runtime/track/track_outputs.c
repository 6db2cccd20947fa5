/* The files of dimoc track (track_outputs.h), written all or nothing. */
#include "track/track_outputs.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"
#include "io/formats.h"
#include "tractogram/tck.h"
#include "tractogram/tractogram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_text_file(const char *dir, const char *name, const char *text, size_t len)
{
    char *path = dm_path_join(dir, name);
    int rc = dm_write_file_atomic(path, text, len);
    free(path);
    return rc;
}

static int write_counts(const char *dir, const char *name, const dm_volume *like,
                        const unsigned int *counts)
{
    size_t n = DM_NVOX(like);
    double *d = malloc(n * sizeof *d);
    if (!d) return dm_set_error("track: out of memory writing %s", name);
    for (size_t v = 0; v < n; v++) d[v] = counts[v];
    char *path = dm_volume_output_path(dir, name);
    int rc = path ? dm_volume_write(path, like, 1, d, DM_OUT_FLOAT32) : -1;
    free(path);
    free(d);
    return rc;
}

/* "i j k 0 row" lines from 3 ints per row. */
static int write_coords(const char *dir, const char *name, const int *ijk, long n, int five)
{
    size_t cap = (size_t)n * 64 + 1, len = 0;
    char *text = malloc(cap);
    if (!text) return dm_set_error("track: out of memory writing %s", name);
    for (long r = 0; r < n; r++) {
        if (five)
            len += snprintf(text + len, cap - len, "%d %d %d 0 %ld\n", ijk[3 * r], ijk[3 * r + 1],
                            ijk[3 * r + 2], r);
        else
            len += snprintf(text + len, cap - len, "%d %d %d\n", ijk[3 * r], ijk[3 * r + 1],
                            ijk[3 * r + 2]);
    }
    int rc = write_text_file(dir, name, text, len);
    free(text);
    return rc;
}

static int write_dot(const char *dir, const char *name, const dm_sparse *sp, long rows, long cols,
                     int symmetrise)
{
    char *path = dm_path_join(dir, name);
    int rc = dm_sparse_write_dot(sp, path, (unsigned int)rows, (unsigned int)cols, symmetrise);
    free(path);
    return rc;
}

/* --network: waytotal with a line per seed mask, fdt_network_matrix (row i: the streamlines of
 * mask i reaching mask j, 0 on the diagonal). */
static int write_network(const char *outdir, const dm_track_seeds *s, const dm_track_result *r)
{
    int ng = s->ngroups;
    size_t cap = (size_t)ng * (ng + 1) * 12 + 1, len = 0;
    char *text = malloc(cap);
    if (!text) return dm_set_error("track: out of memory writing fdt_network_matrix");
    for (int g = 0; g < ng; g++)
        len += snprintf(text + len, cap - len, "%u\n", r->network[ng * ng + g]);
    int rc = write_text_file(outdir, "waytotal", text, len);
    len = 0;
    for (int i = 0; i < ng; i++)
        for (int j = 0; j < ng; j++)
            len += snprintf(text + len, cap - len, "%u%s", r->network[i * ng + j],
                            j + 1 < ng ? "  " : "\n");
    if (rc == 0) rc = write_text_file(outdir, "fdt_network_matrix", text, len);
    free(text);
    return rc;
}

int dm_track_write_outputs(const char *outdir, const dm_track_seeds *s, const dm_track_masks *m,
                           const dm_track_options *o, const dm_track_result *r)
{
    if (dm_mkdir_p(outdir) != 0) return -1;
    char text[64];
    int len = snprintf(text, sizeof text, "%llu\n", r->waytotal);
    if (o->network && r->network ? write_network(outdir, s, r) != 0
                                 : write_text_file(outdir, "waytotal", text, (size_t)len) != 0)
        return -1;
    if (o->opd && write_counts(outdir, "fdt_paths.nii.gz", &s->ref, r->paths) != 0) return -1;
    if (o->os2t && r->seeds_to_targets)
        for (int t = 0; t < m->ntargets; t++) {
            char name[512];
            snprintf(name, sizeof name, "seeds_to_%s.nii.gz", m->target_names[t]);
            if (write_counts(outdir, name, &s->ref, r->seeds_to_targets + (size_t)t * m->nvox) != 0)
                return -1;
        }
    if (o->matrix1) {
        if (write_dot(outdir, "fdt_matrix1.dot", &r->m1, s->n, s->n, 0) != 0 ||
            write_coords(outdir, "coords_for_fdt_matrix1", s->ijk, s->n, 1) != 0)
            return -1;
    }
    if (o->matrix2) {
        if (write_dot(outdir, "fdt_matrix2.dot", &r->m2, s->n, m->n2, 0) != 0 ||
            write_coords(outdir, "coords_for_fdt_matrix2", s->ijk, s->n, 1) != 0 ||
            write_coords(outdir, "tract_space_coords_for_fdt_matrix2", m->t2_ijk, m->n2, 0) != 0)
            return -1;
        size_t n = DM_NVOX(&m->t2_ref);
        double *lookup = calloc(n, sizeof *lookup);
        for (long c = 0; c < m->n2; c++) {
            const int *ijk = m->t2_ijk + 3 * c;
            lookup[((size_t)ijk[2] * m->t2_ref.ny + ijk[1]) * m->t2_ref.nx + ijk[0]] =
                (double)(c + 1);
        }
        char *path = dm_volume_output_path(outdir, "lookup_tractspace_fdt_matrix2.nii.gz");
        int rc = path ? dm_volume_write(path, &m->t2_ref, 1, lookup, DM_OUT_FLOAT32) : -1;
        free(path);
        free(lookup);
        if (rc != 0) return -1;
    }
    if (o->matrix3) {
        if (write_dot(outdir, "fdt_matrix3.dot", &r->m3, m->n3, m->n3, 1) != 0 ||
            write_coords(outdir, "coords_for_fdt_matrix3", m->t3_ijk, m->n3, 1) != 0)
            return -1;
    }
    return 0;
}

int dm_track_write_tck(const char *path, const dm_track_options *o, const dm_track_result *r,
                       const dm_tract_grid *grid)
{
    char info[256];
    snprintf(info, sizeof info,
             "step_size: %g\nmethod: dimoc track (probabilistic, probtrackx-style)\n",
             o->steplength);
    dm_tractogram_writer *w = dm_tractogram_open(path, info, grid);
    if (!w) return -1;
    size_t at = 0;
    for (long i = 0; i < r->ntck; i++) {
        dm_tractogram_add(w, r->tck_xyz + at, (int)r->tck_len[i]);
        at += 3 * (size_t)r->tck_len[i];
    }
    return dm_tractogram_close(w, r->tck_tracked);
}

/* --part: part.json, how `dimoc merge` joins each output with the other parts' (last, so that
 * a part that fails before leaves none). */
static int write_part(const char *dir, const char *tck_name, const dm_track_options *o)
{
    const dm_part_rule rules[] = {
        {tck_name ? tck_name : "", DM_MERGE_TCK},
        {"waytotal", DM_MERGE_COUNTS},
        {"fdt_network_matrix", DM_MERGE_COUNTS},
        {"fdt_paths.nii.gz", DM_MERGE_SUM},
        {"seeds_to_*.nii.gz", DM_MERGE_SUM},
        {"fdt_matrix*.dot", DM_MERGE_DOT},
        {"coords_for_fdt_matrix*", DM_MERGE_SAME},
        {"tract_space_coords_for_fdt_matrix2", DM_MERGE_SAME},
        {"lookup_tractspace_fdt_matrix2.nii.gz", DM_MERGE_SAME},
    };
    char *command = dm_part_command();
    dm_part_info info = {.command = command};
    int rc = dm_part_write(dir, &o->part, &info, rules, (int)(sizeof rules / sizeof *rules));
    free(command);
    return rc;
}

int dm_track_save(const char *outdir, const char *tck_given, const dm_track_seeds *s,
                  const dm_track_masks *m, const dm_track_options *o, const dm_track_result *r,
                  dm_provenance *prov)
{
    /* the streamlines' file: --save-streamlines, its ending that of --format when one is chosen;
     * a TRX or .trk on the seed space's grid */
    char *tck = tck_given ? dm_tractogram_output_name(tck_given) : NULL;
    if (tck_given && !tck) return dm_set_error("out of memory");
    dm_tract_grid grid;
    dm_tract_grid_of(&s->ref, &grid);
    dm_outdir od;
    if (dm_outdir_begin(&od, outdir, DM_OUTDIR_REPLACE) != 0) {
        free(tck);
        return -1;
    }
    /* A .tck file inside outdir is written in the temporary folder with the rest; one
     * elsewhere under a temporary name beside it. */
    size_t n = strlen(outdir);
    while (n > 1 && outdir[n - 1] == '/') n--;
    int inside = tck && !strncmp(tck, outdir, n) && tck[n] == '/';
    char *tck_in = inside ? dm_path_join(od.path, tck + n + 1) : NULL;
    const int format = tck ? dm_tracts_format_of(tck) : -1;
    char *tck_tmp = tck && !inside
                        ? dm_temp_sibling_ext(tck, format >= 0 ? dm_tracts_format_ext(format) : "")
                        : NULL;
    int rc = tck && !tck_in && !tck_tmp ? dm_set_error("out of memory")
                                        : dm_track_write_outputs(od.path, s, m, o, r);
    if (rc == 0 && tck) rc = dm_track_write_tck(inside ? tck_in : tck_tmp, o, r, &grid);
    free(tck_in);
    if (rc == 0) {
        dm_provenance_num(prov, DM_PROV_RESULT, "seeds", (double)s->n);
        dm_provenance_num(prov, DM_PROV_RESULT, "streamlines", (double)r->generated);
        dm_provenance_num(prov, DM_PROV_RESULT, "waytotal", (double)r->waytotal);
        dm_provenance_num(prov, DM_PROV_RESULT, "saved_streamlines", (double)r->ntck);
        dm_provenance_num(prov, DM_PROV_RESULT, "tracking_seconds", r->seconds);
        dm_provenance_str(prov, DM_PROV_RESULT, "device", o->use_gpu ? r->device : "cpu");
        if (o->part.n > 0) {
            dm_provenance_num(prov, DM_PROV_RESULT, "part", o->part.k);
            dm_provenance_num(prov, DM_PROV_RESULT, "parts", o->part.n);
            unsigned long long first, end;
            dm_track_id_range(s, o, &first, &end);
            dm_provenance_num(prov, DM_PROV_RESULT, "streamline_id_first", (double)first);
            dm_provenance_num(prov, DM_PROV_RESULT, "streamline_id_end", (double)end);
        }
        char *path = dm_path_join(od.path, "provenance.json");
        rc = path ? dm_provenance_write(prov, path) : dm_set_error("out of memory");
        free(path);
    }
    if (rc == 0 && o->part.n > 0) rc = write_part(od.path, inside ? tck + n + 1 : NULL, o);
    if (rc != 0) {
        dm_outdir_abort(&od);
        if (tck_tmp) unlink(tck_tmp);
        free(tck_tmp);
        free(tck);
        return -1;
    }
    /* The folder and the .tck file go in place together: no signal between the two. */
    sigset_t saved;
    dm_interrupt_block(&saved);
    rc = dm_outdir_commit(&od);
    if (tck_tmp) {
        char *tmp[1] = {tck_tmp}, *final[1] = {(char *)tck};
        if (rc == 0)
            rc = dm_commit_files(tmp, final, 1);
        else
            unlink(tck_tmp);
    }
    dm_interrupt_unblock(&saved);
    free(tck_tmp);
    free(tck);
    return rc;
}
