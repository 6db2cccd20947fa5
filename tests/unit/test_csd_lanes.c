/* The CSD hard solver shared out over lanes (templates/csd/csd_solve.h), as the GPU runs it on a
 * warp (templates/csd/gpu_csd.cu), run here on the host: N lanes as coroutines that take turns
 * at every DM_CSD_SYNC, each lane running to its next one before the next lane starts (a
 * barrier), in ascending and in descending order of the lanes, so that a read of the workspace
 * that misses a sync sees another lane's value before or after it is written.  On runs of
 * voxels of MRtrix's msmt_csd regression data, each warm-started from the one before, for 32
 * lanes (a warp), 5 and 1 (the GPU's loops on one lane): every lane must return the same
 * outcome, steps and active set, and the FODs, outcomes and steps must be those of the solver
 * the CPU runs (dm_csd_cpu_run, its host loops), to the bit.  About 10 s on 2 cores (a switch of
 * lanes is a system call). */
#include "check.h"
#include "csd/csd_cpu.h"
#include "csd/csd_plan.h"
#include "csd/dwi.h"
#include "csd/response.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define MAX_LANES 32
#define STACK_BYTES (256 * 1024)

/* The lanes: which one runs, how many, in which order they take turns. */
static int emu_lanes = 1, emu_lane = 0, emu_descending = 0, emu_finished = 0;
static ucontext_t emu_main, emu_ctx[MAX_LANES];

static int emu_next(int lane)
{
    return emu_descending ? (lane + emu_lanes - 1) % emu_lanes : (lane + 1) % emu_lanes;
}

/* A barrier: the next lane runs up to its own. */
static void emu_sync(void)
{
    const int from = emu_lane;
    emu_lane = emu_next(from);
    swapcontext(&emu_ctx[from], &emu_ctx[emu_lane]);
}

#define DM_FN static inline
#define DM_CSD_LANES (emu_lanes)
#define DM_CSD_LANE (emu_lane)
#define DM_CSD_SYNC() emu_sync()

static double slot_d[MAX_LANES];
static int slot_i[MAX_LANES];

/* The reductions as the GPU's shuffles give them: every lane gets the result. */
static double emu_reduce(double v, double (*op)(double, double))
{
    slot_d[emu_lane] = v;
    emu_sync();
    double r = slot_d[0];
    for (int l = 1; l < emu_lanes; l++) r = op(r, slot_d[l]);
    emu_sync();
    return r;
}

static double dm_csd_lanes_max_(double v)
{
    return emu_reduce(v, fmax);
}

static double dm_csd_lanes_min_(double v)
{
    return emu_reduce(v, fmin);
}

static void dm_csd_lanes_best_(double *score, int *index)
{
    slot_d[emu_lane] = *score;
    slot_i[emu_lane] = *index;
    emu_sync();
    for (int l = 0; l < emu_lanes; l++) {
        const double s = slot_d[l];
        const int i = slot_i[l];
        if (i >= 0 && (*index < 0 || s > *score || (s == *score && i < *index))) {
            *score = s;
            *index = i;
        }
    }
    emu_sync();
}

#define real double
#include "csd/csd_solve.h"
#undef real

/* One warp's job: voxels first..first+count-1 of Y (m x nvox), warm-started in turn. */
static struct {
    const dm_csd_problem *p;
    const double *Y;
    size_t nvox, first, count;
    double *work, *X;
    int *iwork;
    int status[MAX_LANES][DM_CSD_RUN], iters[MAX_LANES][DM_CSD_RUN], nact[MAX_LANES][DM_CSD_RUN];
} job;

static void lane_main(void)
{
    const int lane = emu_lane;
    int nact = 0;
    for (size_t v = 0; v < job.count; v++) {
        const size_t i = job.first + v;
        int it = 0;
        job.status[lane][v] = dm_csd_solve(job.p, job.Y + i, (long)job.nvox, job.X + i * job.p->n,
                                           job.work, job.iwork, &it, &nact);
        job.iters[lane][v] = it;
        job.nact[lane][v] = nact;
    }
    /* Done: the lanes after this one finish their last part, the last goes back to main. */
    if (++emu_finished == emu_lanes) setcontext(&emu_main);
    emu_lane = emu_next(lane);
    setcontext(&emu_ctx[emu_lane]);
}

/* Runs the job on `lanes` lanes; 0, or -1 when the lanes disagree (message in why). */
static int run_lanes(int lanes, int descending, char *why, size_t whylen)
{
    static char stacks[MAX_LANES][STACK_BYTES];
    emu_lanes = lanes;
    emu_descending = descending;
    emu_finished = 0;
    for (int l = 0; l < lanes; l++) {
        getcontext(&emu_ctx[l]);
        emu_ctx[l].uc_stack.ss_sp = stacks[l];
        emu_ctx[l].uc_stack.ss_size = STACK_BYTES;
        emu_ctx[l].uc_link = NULL;
        makecontext(&emu_ctx[l], lane_main, 0);
    }
    emu_lane = descending ? lanes - 1 : 0;
    swapcontext(&emu_main, &emu_ctx[emu_lane]);
    for (size_t v = 0; v < job.count; v++)
        for (int l = 1; l < lanes; l++)
            if (job.status[l][v] != job.status[0][v] || job.iters[l][v] != job.iters[0][v] ||
                job.nact[l][v] != job.nact[0][v]) {
                snprintf(why, whylen,
                         "voxel %zu: lane %d status %d, %d steps, %d active; lane 0 %d, "
                         "%d, %d",
                         job.first + v, l, job.status[l][v], job.iters[l][v], job.nact[l][v],
                         job.status[0][v], job.iters[0][v], job.nact[0][v]);
                return -1;
            }
    return 0;
}

static int load(const char *root, dm_dwi *d, dm_csd_plan *plan)
{
    char path[4][1024];
    const char *names[4] = {"dwi.nii.gz", "dwi.bvals", "dwi.bvecs", "mask.nii.gz"};
    for (int i = 0; i < 4; i++)
        snprintf(path[i], sizeof path[i], "%s/tests/data/mrtrix_dwi2fod/msmt/%s", root, names[i]);
    if (dm_dwi_read(d, path[0], path[1], path[2], path[3]) != 0) return -1;
    dm_response resp[3];
    int map_store[3][DM_MAX_SHELLS], *map[3] = {map_store[0], map_store[1], map_store[2]};
    const char *tissues[3] = {"wm", "gm", "csf"};
    for (int t = 0; t < 3; t++) {
        char r[1024];
        snprintf(r, sizeof r, "%s/tests/data/mrtrix_dwi2fod/msmt/%s.txt", root, tissues[t]);
        if (dm_response_read(r, &resp[t]) != 0 || dm_response_match(&resp[t], r, d, map[t]) != 0)
            return -1;
    }
    return dm_csd_plan_build(d, 3, resp, map, 8, NULL, plan);
}

int main(void)
{
    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    dm_dwi d = {0};
    dm_csd_plan plan = {0};
    if (load(root, &d, &plan) != 0) {
        check(0, "csd-lanes-load", "%s", dm_last_error());
        return 1;
    }
    const size_t nvox = d.nvox;
    const int n = plan.n, m = plan.m, k = plan.k, max_iter = 10 * n;
    double *Y = malloc(nvox * m * sizeof *Y), *Xref = malloc(nvox * n * sizeof *Xref);
    double *X = calloc(nvox * n, sizeof *X), *work = malloc(DM_CSD_HARD_WORK(n) * sizeof *work);
    unsigned char *st = malloc(nvox);
    int *it = malloc(nvox * sizeof *it), *iwork = malloc(DM_CSD_IWORK(n, k) * sizeof *iwork);
    double *Q = dm_csd_q_table(&plan, 1);
    if (!Y || !Xref || !X || !work || !st || !it || !iwork || !Q) {
        check(0, "csd-lanes-memory", "out of memory");
        return 1;
    }
    for (int j = 0; j < m; j++)
        for (size_t i = 0; i < nvox; i++) Y[j * nvox + i] = dm_dwi_signal(&d, i, plan.vol[j]);
    /* The CPU's solver: one lane, the host's loops. */
    if (dm_csd_cpu_run(&plan, Y, nvox, 0, 1, 1, max_iter, NULL, Xref, st, it) != 0) {
        check(0, "csd-lanes-cpu", "%s", dm_last_error());
        return 1;
    }
    const dm_csd_problem p = {n,       m,       k,       0,        plan.G, plan.C, plan.P, plan.Qd,
                              plan.At, plan.Hp, plan.Ct, max_iter, 1e-10,  1e-12,  Q};
    job.p = &p;
    job.Y = Y;
    job.nvox = nvox;
    job.work = work;
    job.iwork = iwork;
    job.X = X;
    /* Runs spread over the mask (whole runs: each starts cold, as on either device). */
    const struct {
        int lanes, descending, runs;
    } cases[] = {{32, 0, 1}, {32, 1, 1}, {5, 0, 2}, {5, 1, 2}, {1, 0, 2}};
    const size_t nruns = nvox / DM_CSD_RUN;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[128], why[512] = "";
        snprintf(name, sizeof name, "csd-lanes-%d-%s", cases[c].lanes,
                 cases[c].descending ? "descending" : "ascending");
        int ok = 1, steps = 0;
        size_t bad = 0, voxels = 0;
        for (int r = 0; r < cases[c].runs && ok; r++) {
            job.first = (nruns * (2 * (size_t)r + 1) / (2 * (size_t)cases[c].runs)) * DM_CSD_RUN;
            job.count = DM_CSD_RUN;
            if (run_lanes(cases[c].lanes, cases[c].descending, why, sizeof why) != 0) {
                ok = 0;
                break;
            }
            for (size_t v = 0; v < job.count; v++) {
                const size_t i = job.first + v;
                voxels++;
                steps += job.iters[0][v];
                int same = job.status[0][v] == st[i] && job.iters[0][v] == it[i] &&
                           !memcmp(X + i * n, Xref + i * n, n * sizeof *X);
                if (!same && !bad++)
                    snprintf(why, sizeof why, "voxel %zu: status %d, %d steps; the CPU's %d, %d", i,
                             job.status[0][v], job.iters[0][v], st[i], it[i]);
            }
        }
        check(ok && !bad, name, "%s%s(%zu of %zu voxels differ)", why, *why ? " " : "", bad,
              voxels);
        if (ok && !bad)
            printf("     %zu voxels, %.1f steps a voxel: the CPU's FODs, outcomes and steps to the "
                   "bit\n",
                   voxels, (double)steps / (double)voxels);
    }
    free(Y);
    free(Xref);
    free(X);
    free(work);
    free(st);
    free(it);
    free(iwork);
    free(Q);
    dm_csd_plan_free(&plan);
    dm_dwi_free(&d);
    return failures != 0;
}
