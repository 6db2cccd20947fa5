/* The CPU build of the CSD solver: templates/csd/csd_solve.h included once per precision, its
 * names given a suffix, and run over voxels with OpenMP (csd_cpu.h). */
#include "csd/csd_cpu.h"

#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define DM_FN static inline

#define real double
#define dm_csd_problem dm_csd_problem_d
#define dm_csd_dot_ dm_csd_dot_d
#define dm_csd_chol_append_ dm_csd_chol_append_d
#define dm_csd_chol_solve_ dm_csd_chol_solve_d
#define dm_csd_chol_delete_ dm_csd_chol_delete_d
#define dm_csd_update_x_ dm_csd_update_x_d
#define dm_csd_dotd_ dm_csd_dotd_d
#define dm_csd_dotrr_ dm_csd_dotrr_d
#define dm_csd_solve_hard_ dm_csd_solve_hard_d
#define dm_csd_solve_soft_ dm_csd_solve_soft_d
#define dm_csd_solve dm_csd_solve_d
#include "csd/csd_solve.h"
#undef real
#undef dm_csd_problem
#undef dm_csd_dot_
#undef dm_csd_chol_append_
#undef dm_csd_chol_solve_
#undef dm_csd_chol_delete_
#undef dm_csd_update_x_
#undef dm_csd_dotd_
#undef dm_csd_dotrr_
#undef dm_csd_solve_hard_
#undef dm_csd_solve_soft_
#undef dm_csd_solve

#define real float
#define dm_csd_problem dm_csd_problem_f
#define dm_csd_dot_ dm_csd_dot_f
#define dm_csd_chol_append_ dm_csd_chol_append_f
#define dm_csd_chol_solve_ dm_csd_chol_solve_f
#define dm_csd_chol_delete_ dm_csd_chol_delete_f
#define dm_csd_update_x_ dm_csd_update_x_f
#define dm_csd_dotd_ dm_csd_dotd_f
#define dm_csd_dotrr_ dm_csd_dotrr_f
#define dm_csd_solve_hard_ dm_csd_solve_hard_f
#define dm_csd_solve_soft_ dm_csd_solve_soft_f
#define dm_csd_solve dm_csd_solve_f
#include "csd/csd_solve.h"
#undef real

int dm_csd_cpu_run(const dm_csd_plan *p, const double *Y, size_t nvox, int use_double, int threads,
                   int max_iter, const char *progress, double *X, unsigned char *status, int *iters)
{
    const int n = p->n, m = p->m, k = p->k;
    dm_csd_problem_d pd = {n,     m,     k,     p->soft, p->G,     p->C,  p->P,
                           p->Qd, p->At, p->Hp, p->Ct,   max_iter, 1e-10, 1e-12};
    dm_csd_problem_f pf = {n,      m,      k,      p->soft, p->Gf,    p->Cf,  p->Pf,
                           p->Qdf, p->Atf, p->Hpf, p->Ctf,  max_iter, 1e-10f, 1e-12f};
    dm_progress *prog = progress ? dm_progress_start(progress, (long)nvox, "voxels") : NULL;
    int failed = 0;
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
    {
        size_t wn = DM_CSD_WORK(n, k), iwn = DM_CSD_IWORK(n, k);
        double *wd = malloc(wn * sizeof(double));
        float *wf = malloc((size_t)(n + m) * sizeof(float));
        int *iw = malloc(iwn * sizeof(int));
        if (!wd || !wf || !iw) {
#pragma omp atomic write
            failed = 1;
        }
        long done = 0;
#pragma omp for schedule(dynamic, 64)
        for (size_t i = 0; i < nvox; i++) {
            if (failed || dm_stop_requested()) continue;
            int it = 0, st;
            if (use_double) {
                st = dm_csd_solve_d(&pd, Y + i, (long)nvox, X + i * n, wd, iw, &it);
            } else {
                float *y = wf, *x = y + m;
                for (int j = 0; j < m; j++) y[j] = (float)Y[j * nvox + i];
                st = dm_csd_solve_f(&pf, y, 1, x, wd, iw, &it);
                for (int c = 0; c < n; c++) X[i * n + c] = x[c];
            }
            status[i] = (unsigned char)st;
            if (iters) iters[i] = it;
            if (++done == 1024 && prog) {
                dm_progress_add(prog, done);
                done = 0;
            }
        }
        if (prog) dm_progress_add(prog, done);
        free(wd);
        free(wf);
        free(iw);
    }
    if (prog) dm_progress_end(prog);
    if (failed) return dm_set_error("out of memory for the CSD workspaces");
    if (dm_stop_requested()) return dm_stop_error();
    return 0;
}
