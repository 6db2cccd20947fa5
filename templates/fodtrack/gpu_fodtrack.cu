/* The GPU build of FOD tractography (runtime/fodtrack/fodtrack_gpu.c compiles it with NVRTC;
 * in double with --fmad=false, so that every operation rounds as on the host and the
 * streamlines are the CPU's point for point).  The prologue defines DM_FT_DOUBLE 0 or 1.
 *
 * Persistent threads, one streamline at a time each: a thread's loop advances its streamline by
 * one step per turn (an iFOD2 arc with its points, or one step of iFOD1 / SD_STREAM) and takes
 * the next id from a shared counter the moment its streamline ends, so that the lanes of a warp
 * stay on live streamlines whatever their lengths, and run the same step code together. */
#define DM_FN static __device__ __forceinline__
#include "maths/philox.h"
#include "fodtrack/ft_types.h"
#if DM_FT_DOUBLE
#define real double
#else
#define real float
#endif
#define DM_FT(name) dm_ft_##name
#include "fodtrack/det_math.h"
#include "fodtrack/fod_field.h"
#include "fodtrack/fod_track.h"

/* Where a launch puts its results (runtime/fodtrack/fodtrack_gpu.c mirrors it). */
typedef struct dm_ft_gpu_out {
    unsigned char *verdict; /* per index of the launch: DM_FT_ACCEPTED, DM_FT_REJECT_*, or
                               DM_FT_GPU_RETRY when its points did not fit */
    unsigned char *ends;    /* 2 per index: the halves' terminations */
    unsigned long long *rec_id, *rec_start; /* accepted: id, first point in xyz */
    int *rec_npts, *rec_seed;
    float *xyz;
    unsigned long long cap_points;
    unsigned long long *counters; /* next index, accepted, points used, truncations, FOD
                                     amplitudes evaluated */
} dm_ft_gpu_out;

#define DM_FT_GPU_RETRY 255

/* Indices i of [0, n) are ids first + i, or ids[i] when ids is given (a retry). */
extern "C" __global__ void dm_fodtrack_kernel(dm_ft_ctx c, dm_ft_gpu_out o, real *bufs,
                                              int buf_points, unsigned long long first,
                                              unsigned long long n, const unsigned long long *ids)
{
    const unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    real *buf = bufs + t * 3 * (unsigned long long)buf_points;
    real coef[DM_FOD_NCOEF_MAX];
    DM_FT(state) s;
    unsigned long long i = 0, id = 0, truncations = 0, evals = 0;
    int active = 0;
    for (;;) {
        if (!active) {
            i = atomicAdd(&o.counters[0], 1ull);
            if (i >= n) break;
            id = ids ? ids[i] : first + i;
            if (DM_FT(ft_seed)(&c, id, &s, buf, coef)) {
                active = 1;
            } else {
                o.verdict[i] = DM_FT_REJECT_SEED;
                o.ends[2 * i] = o.ends[2 * i + 1] = 0;
            }
            continue;
        }
        if (!DM_FT(ft_step)(&c, &s, buf, coef) || DM_FT(ft_turn)(&c, &s, buf)) continue;
        active = 0;
        int np = 0, seed = 0;
        int v = DM_FT(ft_finish)(&c, &s, buf, &np, &seed);
        o.ends[2 * i] = (unsigned char)s.end1;
        o.ends[2 * i + 1] = (unsigned char)(s.half == 2 ? s.end2 : 0);
        truncations += s.truncations;
        evals += s.evals;
        if (v == DM_FT_ACCEPTED) {
            unsigned long long at = atomicAdd(&o.counters[2], (unsigned long long)np);
            if (at + np > o.cap_points) {
                v = DM_FT_GPU_RETRY;
            } else {
                for (int k = 0; k < 3 * np; k++) o.xyz[3 * at + k] = (float)buf[k];
                unsigned long long r = atomicAdd(&o.counters[1], 1ull);
                o.rec_id[r] = id;
                o.rec_start[r] = at;
                o.rec_npts[r] = np;
                o.rec_seed[r] = seed;
            }
        }
        o.verdict[i] = (unsigned char)v;
    }
    if (truncations) atomicAdd(&o.counters[3], truncations);
    if (evals) atomicAdd(&o.counters[4], evals);
}
