/* The CPU build of the CSD solver: templates/csd/csd_solve.h included once per precision (and
 * once more per precision for AVX2), its names given a suffix (csd_cpu_instance.h), and run
 * over voxels with OpenMP (csd_cpu.h).  The hard solver's table
 * Q = C P' (k x k) is made here, once per run (and for the GPU's), with the template's own sum,
 * so that looking an entry up gives the bits computing it would. */
#include "csd/csd_cpu.h"

#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define DM_FN static inline
#define DM_CSD_HOST /* the template's host loops: the same bits as the GPU's, sooner */

#define real double
#define DM_CSD_REAL_FLOAT 0
#define DM_CSD_SFX _d
#include "csd/csd_cpu_instance.h"
#undef real
#undef DM_CSD_REAL_FLOAT
#undef DM_CSD_SFX

#define real float
#define DM_CSD_REAL_FLOAT 1
#define DM_CSD_SFX _f
#include "csd/csd_cpu_instance.h"
#undef real
#undef DM_CSD_REAL_FLOAT
#undef DM_CSD_SFX

/* The same again for x86-64 processors with AVX2, chosen at run time: twice the vector width
 * for the products.  AVX2 without FMA, so the bits are those of the instance above. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DM_CSD_HAVE_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define DM_CSD_HOST_WIDE
#define real double
#define DM_CSD_REAL_FLOAT 0
#define DM_CSD_SFX _d_avx2
#include "csd/csd_cpu_instance.h"
#undef real
#undef DM_CSD_REAL_FLOAT
#undef DM_CSD_SFX
#define real float
#define DM_CSD_REAL_FLOAT 1
#define DM_CSD_SFX _f_avx2
#include "csd/csd_cpu_instance.h"
#undef real
#undef DM_CSD_REAL_FLOAT
#undef DM_CSD_SFX
#undef DM_CSD_HOST_WIDE
#pragma GCC pop_options
#else
#define DM_CSD_HAVE_AVX2 0
#endif

/* 1 when the AVX2 instance can run here: the processor has AVX2 and the system saves its
 * registers (as __builtin_cpu_supports checks), and DIMOC_CSD_ISA does not ask for the
 * baseline ("sse2": to compare the two, which give the same bits). */
static int use_avx2(void)
{
#if DM_CSD_HAVE_AVX2
    const char *isa = getenv("DIMOC_CSD_ISA");
    if (isa && !strcmp(isa, "sse2")) return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
#else
    return 0;
#endif
}

#define DM_CSD_PROBLEM_D(Q)                                                                        \
    {                                                                                              \
        n, m, k, p->soft, p->G, p->C, p->P, p->Qd, p->At, p->Hp, p->Ct, max_iter, 1e-10, 1e-12, Q  \
    }
#define DM_CSD_PROBLEM_F                                                                           \
    {                                                                                              \
        n, m, k, p->soft, p->Gf, p->Cf, p->Pf, p->Qdf, p->Atf, p->Hpf, p->Ctf, max_iter, 1e-10f,   \
            1e-12f, NULL                                                                           \
    }

double *dm_csd_q_table(const dm_csd_plan *p, int threads)
{
    const int n = p->n, k = p->k;
    double *Q = malloc((size_t)k * k * sizeof *Q);
    if (!Q) {
        dm_set_error("out of memory for the CSD's %d x %d constraint table", k, k);
        return NULL;
    }
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            Q[(size_t)i * k + j] = dm_csd_dotrr_d(p->C + (size_t)i * n, p->P + (size_t)j * n, n);
    return Q;
}

int dm_csd_cpu_run(const dm_csd_plan *p, const double *Y, size_t nvox, size_t first, int use_double,
                   int threads, int max_iter, const char *progress, double *X,
                   unsigned char *status, int *iters)
{
    const int n = p->n, m = p->m, k = p->k;
    const int wide = use_avx2();
    double *Q = NULL;
    if (!p->soft && use_double && !(Q = dm_csd_q_table(p, threads))) return -1;
    const dm_csd_problem_d pd = DM_CSD_PROBLEM_D(Q);
    const dm_csd_problem_f pf = DM_CSD_PROBLEM_F;
#if DM_CSD_HAVE_AVX2
    const dm_csd_problem_d_avx2 pd_wide = DM_CSD_PROBLEM_D(Q);
    const dm_csd_problem_f_avx2 pf_wide = DM_CSD_PROBLEM_F;
#endif
    dm_progress *prog = progress ? dm_progress_start(progress, (long)nvox, "voxels") : NULL;
    int failed = 0;
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
    {
        size_t wn = DM_CSD_WORK(n, k), iwn = DM_CSD_IWORK_HOST(n, k);
        double *wd = malloc(wn * sizeof(double)), *yd = malloc((size_t)m * sizeof(double));
        float *wf = malloc((size_t)(n + m) * sizeof(float));
        int *iw = malloc(iwn * sizeof(int));
        if (!wd || !yd || !wf || !iw) {
#pragma omp atomic write
            failed = 1;
        }
        long done = 0;
        /* Run r: voxels r DM_CSD_RUN - lead ... (r + 1) DM_CSD_RUN - lead - 1, one thread's,
         * each starting from the active set the one before left in iw (nact of them). */
        const size_t lead = first % DM_CSD_RUN, runs = (lead + nvox + DM_CSD_RUN - 1) / DM_CSD_RUN;
#pragma omp for schedule(dynamic, 4)
        for (size_t r = 0; r < runs; r++) {
            const size_t from = r * DM_CSD_RUN > lead ? r * DM_CSD_RUN - lead : 0;
            const size_t to =
                (r + 1) * DM_CSD_RUN - lead < nvox ? (r + 1) * DM_CSD_RUN - lead : nvox;
            int nact = 0;
            for (size_t i = from; i < to; i++) {
                if (failed || dm_stop_requested()) continue;
                int it = 0, st;
                if (use_double) {
                    /* the voxel's signal gathered once (Y is measurement-major) */
                    for (int j = 0; j < m; j++) yd[j] = Y[j * nvox + i];
#if DM_CSD_HAVE_AVX2
                    if (wide)
                        st = dm_csd_solve_d_avx2(&pd_wide, yd, 1, X + i * n, wd, iw, &it, &nact);
                    else
#endif
                        st = dm_csd_solve_d(&pd, yd, 1, X + i * n, wd, iw, &it, &nact);
                } else {
                    float *y = wf, *x = y + m;
                    for (int j = 0; j < m; j++) y[j] = (float)Y[j * nvox + i];
#if DM_CSD_HAVE_AVX2
                    if (wide)
                        st = dm_csd_solve_f_avx2(&pf_wide, y, 1, x, wd, iw, &it, &nact);
                    else
#endif
                        st = dm_csd_solve_f(&pf, y, 1, x, wd, iw, &it, &nact);
                    for (int c = 0; c < n; c++) X[i * n + c] = x[c];
                }
                status[i] = (unsigned char)st;
                if (iters) iters[i] = it;
                if (++done == 1024 && prog) {
                    dm_progress_add(prog, done);
                    done = 0;
                }
            }
        }
        if (prog) dm_progress_add(prog, done);
        free(wd);
        free(yd);
        free(wf);
        free(iw);
    }
    if (prog) dm_progress_end(prog);
    free(Q);
    if (failed) return dm_set_error("out of memory for the CSD workspaces");
    if (dm_stop_requested()) return dm_stop_error();
    return 0;
}
