/* The back end's driver: builds the programs of a checked model, then asks the emitter for the
 * generated source, the flop counter for the work counts and the metadata writer for the
 * metadata file (backend.h); dm_emit_dir writes the two files. */
#include "backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dm_generate(const dm_model *m, dm_generated *out, FILE *err)
{
    return dm_generate_stage(m, 0, out, err);
}

int dm_generate_stage(const dm_model *m, unsigned held, dm_generated *out, FILE *err)
{
    memset(out, 0, sizeof *out);
    dm_diag diag;
    dm_diag_init(&diag, err ? err : stderr, m->file ? m->file : "<model>",
                 m->source ? m->source : "", m->source ? strlen(m->source) : 0);
    diag.model = m; /* locations inside imported definitions name their own file */
    dm_programs G;
    int rc = dm_programs_build(&G, m, held, &diag);
    if (rc == 0) {
        out->source = dm_emit_source(m, &G);
        dm_programs_flops(&G, &out->flops);
        out->meta = dm_meta_text(m, &out->flops, out->source);
    }
    dm_programs_free(&G);
    dm_diag_flush(&diag);
    return rc;
}

void dm_generated_free(dm_generated *g)
{
    if (!g) return;
    free(g->source);
    free(g->meta);
    memset(g, 0, sizeof *g);
}

/* ---- writing the files ---- */

static int mkdir_parents(const char *dir)
{
    size_t len = strlen(dir);
    char *path = malloc(len + 1);
    if (!path) return -1;
    memcpy(path, dir, len + 1);
    for (char *s = path + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            free(path);
            return -1;
        }
        *s = '/';
    }
    int rc = mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
    free(path);
    return rc;
}

/* Writes dir/name through a temporary sibling and rename(2), so a reader never sees half a
 * file. */
static int write_atomic(const char *dir, const char *name, const char *text, FILE *err)
{
    size_t len = strlen(dir) + strlen(name) + 64;
    char *path = malloc(len), *tmp = malloc(len);
    if (!path || !tmp) abort();
    snprintf(path, len, "%s/%s", dir, name);
    snprintf(tmp, len, "%s/.%s.tmp.%ld", dir, name, (long)getpid());
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(text, f) >= 0;
    ok = f && fclose(f) == 0 && ok;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        fprintf(err ? err : stderr, "dimoc: error: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
    }
    free(path);
    free(tmp);
    return ok ? 0 : -1;
}

int dm_emit_dir(const dm_model *m, const char *dir, FILE *err)
{
    dm_generated g;
    if (dm_generate(m, &g, err) != 0) return -1;
    int rc = 0;
    if (mkdir_parents(dir) != 0) {
        fprintf(err ? err : stderr, "dimoc: error: cannot create %s: %s\n", dir, strerror(errno));
        rc = -1;
    }
    if (rc == 0) rc = write_atomic(dir, "model.h", g.source, err);
    if (rc == 0) rc = write_atomic(dir, "model.meta", g.meta, err);
    dm_generated_free(&g);
    return rc;
}
