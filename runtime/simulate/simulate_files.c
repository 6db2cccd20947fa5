/* `dimoc simulate`'s side of the simulator (simulate.h): its files (the parameter and per-voxel
 * maps, the mask, the protocol) read into the engine's arrays, and the image, the mask and the
 * provenance written.  The C API links none of this. */
#include "simulate/simulate.h"
#include "io/scheme_file.h"
#include "io/textio.h"
#include "io/volume.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every NAME of "NAME=VALUE,.." is a parameter (params) or a per-voxel input of the model. */
static int check_names(const char *spec, const char *what, const dm_model_info *mi, int params)
{
    if (!spec) return 0;
    char *copy = strdup(spec), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            rc = dm_set_error("%s: '%s' is not of the form NAME=VALUE", what, t);
            break;
        }
        *eq = 0;
        int ok = 0;
        if (params)
            ok = dm_model_param_index(mi, t) >= 0;
        else
            for (int i = 0; i < mi->nvoxels; i++) ok |= !strcmp(mi->voxels[i].name, t);
        if (!ok)
            rc = dm_set_error("%s: model '%s' has no %s '%s'", what, mi->name,
                              params ? "parameter" : "per-voxel input", t);
    }
    free(copy);
    return rc;
}

/* The value of NAME in "NAME=VALUE,.." (the last one given); 0 when absent. */
static int find_value(const char *spec, const char *name, char *value, size_t n)
{
    if (!spec) return 0;
    char *copy = strdup(spec), *save = NULL;
    int found = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq && (size_t)(eq - t) == strlen(name) && !strncmp(t, name, eq - t)) {
            snprintf(value, n, "%s", eq + 1);
            found = 1;
        }
    }
    free(copy);
    return found;
}

/* NAME's value of spec as an item: a number, else a map, which must be on the grid of the
 * first map opened (*grid).  1 when spec names NAME, 0 when not, -1 on error. */
static int read_item(const char *spec, const char *name, dm_fit_items *items,
                     const dm_volume **grid)
{
    char text[4096];
    if (!find_value(spec, name, text, sizeof text)) return 0;
    dm_fit_item *x = &items->item[items->n++];
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->text, sizeof x->text, "%.500s", text);
    char *end;
    double value = strtod(text, &end);
    if (*text && !*end) {
        x->rows = malloc(sizeof *x->rows);
        if (!x->rows) return dm_set_error("out of memory");
        x->rows[0] = value;
        x->map = (dm_array){x->rows, DM_ARRAY_F64, 0, {0}, {0}};
        return 1;
    }
    if (dm_volume_read(text, &x->owned) != 0) return -1;
    if (*grid && dm_volume_check_same_grid(&x->owned, text, *grid, "the first map") != 0) return -1;
    if (!*grid) *grid = &x->owned;
    x->map = dm_array_of_volume(&x->owned);
    return 1;
}

/* The protocol's length: the number of b-values, else the scheme file's rows, else the length
 * of the first measure file (its longer side). */
static int protocol_length(const dm_simulate_settings *s, int *M)
{
    int r, c;
    double *tmp;
    if (s->bvals) {
        if (dm_read_matrix(s->bvals, &r, &c, &tmp) != 0) return -1;
        *M = r * c;
        free(tmp);
        return 0;
    }
    if (s->scheme) {
        dm_scheme sch;
        if (dm_scheme_read(s->scheme, &sch) != 0) return -1;
        *M = sch.rows;
        dm_scheme_free(&sch);
        return 0;
    }
    const char *eq = s->measure ? strchr(s->measure, '=') : NULL;
    if (!eq)
        return dm_set_error(
            "simulate: give --bvals, --scheme or --measure NAME=FILE to define the protocol");
    char path[4096];
    snprintf(path, sizeof path, "%s", eq + 1);
    char *comma = strchr(path, ',');
    if (comma) *comma = 0;
    if (dm_read_matrix(path, &r, &c, &tmp) != 0) return -1;
    *M = r > c ? r : c;
    free(tmp);
    return 0;
}

/* The reader: every input of the command into in (the maps in params and voxel). */
static int read_inputs(const dm_simulate_settings *s, const dm_model_info *mi,
                       dm_simulate_inputs *in, dm_fit_files *protocol, dm_volume *mask)
{
    if (check_names(s->params, "--params", mi, 1) != 0 ||
        check_names(s->voxel, "--voxel", mi, 0) != 0)
        return -1;
    in->params.item = calloc((size_t)mi->nparams + 1, sizeof *in->params.item);
    in->voxel.item = calloc((size_t)mi->nvoxels + 1, sizeof *in->voxel.item);
    if (!in->params.item || !in->voxel.item) return dm_set_error("out of memory");
    const dm_volume *grid = NULL;
    for (int k = 0; k < mi->nparams; k++) {
        int found = read_item(s->params, mi->params[k].name, &in->params, &grid);
        if (found < 0) return -1;
        if (!found)
            return dm_set_error("simulate: --params gives no value for parameter '%s'",
                                mi->params[k].name);
    }
    for (int i = 0; i < mi->nvoxels; i++)
        if (read_item(s->voxel, mi->voxels[i].name, &in->voxel, &grid) < 0) return -1;
    if (s->mask) {
        if (dm_volume_read(s->mask, mask) != 0) return -1;
        if (mask->nt > 1) return dm_set_error("%s: a 4D image; a mask is 3D", s->mask);
        if (grid && dm_volume_check_same_grid(mask, s->mask, grid, "the maps") != 0) return -1;
        if (!grid && (mask->nx != s->voxels || mask->ny != 1 || mask->nz != 1))
            return dm_set_error("%s: a %dx%dx%d mask for %ld x 1 x 1 voxels (no parameter is a "
                                "map)",
                                s->mask, mask->nx, mask->ny, mask->nz, s->voxels);
        in->mask = dm_array_of_volume(mask);
        in->mask_name = s->mask;
    }
    in->nx = grid ? (size_t)grid->nx : (size_t)s->voxels;
    in->ny = grid ? (size_t)grid->ny : 1;
    in->nz = grid ? (size_t)grid->nz : 1;
    if (protocol_length(s, &in->M) != 0 ||
        dm_fit_read_protocol(mi, s->bvals, s->bvecs, s->measure, s->scheme, in->M, protocol) != 0)
        return -1;
    in->protocol = protocol->in;
    return 0;
}

/* The image, the mask and the provenance, in place together (util/outdir.h). */
static int write_outputs(const dm_simulate_settings *s, const dm_model_info *mi,
                         const dm_simulate_inputs *in, const dm_volume *grid,
                         const dm_simulation *sim, dm_provenance *prov)
{
    char *tmp[3] = {NULL, NULL, NULL}, *final[3] = {(char *)s->out, (char *)s->mask_out, NULL};
    double *mask = NULL;
    int rc = 0, nx = (int)in->nx, ny = (int)in->ny, nz = (int)in->nz;
    final[2] = dm_provenance_sidecar(s->out);
    if (!(tmp[0] = dm_volume_temp_name(s->out)) ||
        (s->mask_out && !(tmp[1] = dm_volume_temp_name(s->mask_out)))) {
        rc = -1;
        goto done;
    }
    if (!final[2] || !(tmp[2] = dm_temp_sibling(final[2])) ||
        !(mask = malloc(sim->nvox * sizeof *mask))) {
        rc = dm_set_error("out of memory");
        goto done;
    }
    for (size_t v = 0; v < sim->nvox; v++) mask[v] = sim->mask[v];
    if (grid)
        rc = dm_volume_write(tmp[0], grid, in->M, sim->signal, DM_OUT_FLOAT32);
    else
        rc = dm_volume_write_new(tmp[0], nx, ny, nz, in->M, 2.0, sim->signal);
    if (rc == 0 && s->mask_out) {
        if (grid)
            rc = dm_volume_write(tmp[1], grid, 1, mask, DM_OUT_UINT8);
        else
            rc = dm_volume_write_new(tmp[1], nx, ny, nz, 1, 2.0, mask);
    }
    if (rc == 0) {
        dm_simulate_provenance(prov, mi, sim);
        rc = dm_provenance_write(prov, tmp[2]);
    }
    if (rc == 0) {
        rc = dm_commit_files(tmp, final, 3); /* renames them, or removes them */
        for (int i = 0; i < 3; i++) {
            free(tmp[i]);
            tmp[i] = NULL;
        }
    }
done:
    for (int i = 0; i < 3; i++)
        if (tmp[i]) {
            unlink(tmp[i]);
            free(tmp[i]);
        }
    free(final[2]);
    free(mask);
    return rc;
}

int dm_simulate_run(const dm_simulate_settings *s, dm_provenance *prov)
{
    dm_model_info mi;
    memset(&mi, 0, sizeof mi);
    dm_simulate_inputs in;
    memset(&in, 0, sizeof in);
    in.params_option = "--params";
    in.voxel_option = "--voxel";
    in.noise = s->noise;
    in.snr = s->snr;
    in.seed = s->seed;
    dm_fit_files protocol;
    memset(&protocol, 0, sizeof protocol);
    dm_volume mask = {0};
    dm_simulation sim = {0};
    int rc = dm_model_load(s->model, &mi);
    if (rc == 0) rc = read_inputs(s, &mi, &in, &protocol, &mask);
    if (rc == 0) rc = dm_simulate(&mi, &in, NULL, &sim);
    if (rc == 0) {
        /* the maps' grid and geometry: the first map read */
        const dm_volume *grid = NULL;
        for (int i = 0; i < in.params.n + in.voxel.n && !grid; i++) {
            const dm_fit_item *x =
                i < in.params.n ? &in.params.item[i] : &in.voxel.item[i - in.params.n];
            if (x->owned.data) grid = &x->owned;
        }
        rc = write_outputs(s, &mi, &in, grid, &sim, prov);
    }
    dm_simulation_free(&sim);
    dm_fit_items_free(&in.params);
    dm_fit_items_free(&in.voxel);
    dm_fit_files_free(&protocol);
    dm_volume_free(&mask);
    dm_model_info_free(&mi);
    return rc;
}
