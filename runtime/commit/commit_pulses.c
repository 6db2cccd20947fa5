#include "commit/commit_pulses.h"

#include "io/scheme_file.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int check_row(const char *path, int i, double G, double Delta, double delta, double b)
{
    if (!(isfinite(G) && isfinite(Delta) && isfinite(delta) && G >= 0 && Delta >= 0 && delta >= 0))
        return dm_set_error("%s: row %d: G, Delta and delta must be finite and >= 0 (T/m, s, s)",
                            path, i + 1);
    if (G > 0 && !(delta > 0 && Delta >= delta))
        return dm_set_error("%s: row %d: a gradient needs delta > 0 and Delta >= delta (s)", path,
                            i + 1);
    const double gd = DM_COMMIT_GAMMA * G * delta;
    const double bs = gd * gd * (Delta - delta / 3) * 1e-6; /* s/mm^2 */
    if (fabs(bs - b) > 0.01 * fmax(bs, b) && fabs(bs - b) > 1)
        return dm_set_error("%s: row %d: G, Delta, delta give b = %.6g s/mm^2 but volume %d's "
                            "b-value is %.6g (G in T/m, Delta and delta in s?)",
                            path, i + 1, bs, i + 1, b);
    return 0;
}

int dm_commit_pulses_take(const char *name, int nvol, const double *rows, const double *bval,
                          dm_commit_pulse_table *p)
{
    memset(p, 0, sizeof *p);
    p->G = malloc((size_t)(nvol ? nvol : 1) * sizeof *p->G);
    p->Delta = malloc((size_t)(nvol ? nvol : 1) * sizeof *p->Delta);
    p->delta = malloc((size_t)(nvol ? nvol : 1) * sizeof *p->delta);
    int rc = p->G && p->Delta && p->delta ? 0 : dm_set_error("commit: out of memory");
    for (int i = 0; rc == 0 && i < nvol; i++) {
        p->G[i] = rows[3 * (size_t)i];
        p->Delta[i] = rows[3 * (size_t)i + 1];
        p->delta[i] = rows[3 * (size_t)i + 2];
        rc = check_row(name, i, p->G[i], p->Delta[i], p->delta[i], bval[i]);
    }
    if (rc != 0) {
        dm_commit_pulses_free(p);
        return -1;
    }
    p->view = (dm_commit_pulses){p->G, p->Delta, p->delta};
    return 0;
}

int dm_commit_pulses_read(const char *path, int nvol, const double *bval, dm_commit_pulse_table *p)
{
    memset(p, 0, sizeof *p);
    dm_scheme s;
    if (dm_scheme_read(path, &s) != 0) return -1;
    static const char *const names[] = {"G", "Delta", "delta"};
    int col[3], rc = 0;
    for (int j = 0; j < 3 && rc == 0; j++)
        if ((col[j] = dm_scheme_column(&s, names[j])) < 0) {
            char have[512];
            dm_scheme_names(&s, have, sizeof have);
            rc = dm_set_error("%s: the cylinder model needs the columns G, Delta and delta (a "
                              "Camino STEJSKALTANNER scheme, or a header naming them); it has: %s",
                              path, have);
        }
    if (rc == 0 && s.rows != nvol)
        rc = dm_set_error("%s: %d row%s, but the data have %d volume%s", path, s.rows,
                          s.rows == 1 ? "" : "s", nvol, nvol == 1 ? "" : "s");
    double *rows = rc == 0 ? malloc((size_t)(nvol ? nvol : 1) * 3 * sizeof *rows) : NULL;
    if (rc == 0 && !rows) rc = dm_set_error("commit: out of memory");
    for (int i = 0; rc == 0 && i < nvol; i++)
        for (int j = 0; j < 3; j++) rows[3 * (size_t)i + j] = s.values[(size_t)i * s.cols + col[j]];
    dm_scheme_free(&s);
    if (rc == 0) rc = dm_commit_pulses_take(path, nvol, rows, bval, p);
    free(rows);
    return rc;
}

void dm_commit_pulses_free(dm_commit_pulse_table *p)
{
    free(p->G);
    free(p->Delta);
    free(p->delta);
    memset(p, 0, sizeof *p);
}
