/* Scratch check (not a project test): the fitting templates under NVRTC on a GPU, against the
 * same templates on the host.  Usage: gpu_check MODEL.c NLANES [compile-only] */
#include <cuda.h>
#include <nvrtc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef double real;
#define DM_FN static inline
#include "mathlib.h"
#include "model_api.h"
#include MODEL_FILE
#include "fit_api.h"
#include "lanes.h"
#include "philox.h"
#include "fit_common.h"
#include "grid.h"
#include "lm.h"
#include "mcmc.h"
#include "fit_voxel.h"

#define CK(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char *s_; cuGetErrorString(e_, &s_); printf("FAIL %s: %s\n", #x, s_); exit(1); } } while (0)

static const char *kernel_src =
    "typedef double real;\n#define DM_FN static __device__ inline\n"
    "#include \"mathlib.h\"\n#include \"model_api.h\"\n#include MODEL_FILE\n#include \"fit_api.h\"\n"
    "#include \"lanes.h\"\n#include \"philox.h\"\n#include \"fit_common.h\"\n#include \"grid.h\"\n"
    "#include \"lm.h\"\n#include \"mcmc.h\"\n#include \"fit_voxel.h\"\n"
    "extern \"C\" __global__ void fit_all(dm_fit_config cfg, const real *grid, const real *meas,\n"
    "  const real *y, real *params, real *samples, real *stats, int *status, int nvox) {\n"
    "  int v = (blockIdx.x * blockDim.x + threadIdx.x) / DM_NLANES; if (v >= nvox) return;\n"
    "  int ns = DM_NSAMPLES(&cfg); real dummy = 0;\n"
    "  dm_voxel_data d = {cfg.nmeas, meas, y + (long long)v * cfg.nmeas, &dummy};\n"
    "  int st = dm_fit_one_voxel(&cfg, grid, &d, v, params + v * DM_NPARAMS,\n"
    "     samples + (long long)v * ns * DM_NPARAMS, DM_NPARAMS, stats + v * DM_NSTATS);\n"
    "  if (DM_LANE_LEADER) status[v] = st; }\n"
    "extern \"C\" __global__ void lanes_agree(dm_fit_config cfg, const real *meas, const real *y,\n"
    "  const real *start, real *out, int nvox) {\n"
    "  int v = (blockIdx.x * blockDim.x + threadIdx.x) / DM_NLANES; if (v >= nvox) return;\n"
    "  real dummy = 0, p[DM_NPARAMS], sse, acc, tau; int it;\n"
    "  for (int k = 0; k < DM_NPARAMS; k++) p[k] = start[v * DM_NPARAMS + k];\n"
    "  dm_voxel_data d = {cfg.nmeas, meas, y + (long long)v * cfg.nmeas, &dummy};\n"
    "  dm_lm_fit(&cfg, &d, p, &it, &sse);\n"
    "  cfg.sample_every = 0; dm_mcmc_run(&cfg, &d, v, p, &dummy, 0, &acc, &tau);\n"
    "  for (int k = 0; k < DM_NPARAMS; k++) out[((long long)v * DM_NLANES + DM_LANE) * DM_NPARAMS + k] = p[k]; }\n";

int main(int argc, char **argv)
{
    int nlanes = atoi(argv[1]);
    int compile_only = argc > 2;
    char opt_lanes[64], opt_model[512], opt_arch[64];
    snprintf(opt_lanes, sizeof opt_lanes, "-DDM_NLANES=%d", nlanes);
    snprintf(opt_model, sizeof opt_model, "-DMODEL_FILE=%s", MODEL_FILE_PLAIN);
    int major = 9, minor = 0;
    CUdevice dev; CUcontext ctx;
    if (!compile_only) {
        CK(cuInit(0)); CK(cuDeviceGet(&dev, 0));
        CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
        CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
        CK(cuCtxCreate(&ctx, NULL, 0, dev));
    }
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *opts[] = {opt_lanes, opt_model, opt_arch, "-Itemplates", "-I.", "-std=c++17"};
    nvrtcProgram prog;
    nvrtcCreateProgram(&prog, kernel_src, "fit.cu", 0, NULL, NULL);
    nvrtcResult r = nvrtcCompileProgram(prog, 6, opts);
    size_t logn; nvrtcGetProgramLogSize(prog, &logn);
    char *log = malloc(logn + 1); nvrtcGetProgramLog(prog, log); 
    if (r != NVRTC_SUCCESS || logn > 1) printf("nvrtc log:\n%s\n", log);
    printf("%s nvrtc_compile_lanes_%d\n", r == NVRTC_SUCCESS ? "PASS" : "FAIL", nlanes);
    if (r != NVRTC_SUCCESS || compile_only) return r != NVRTC_SUCCESS;
    size_t n; nvrtcGetCUBINSize(prog, &n); char *cubin = malloc(n); nvrtcGetCUBIN(prog, cubin);
    CUmodule mod; CUfunction f_fit, f_agree;
    CK(cuModuleLoadData(&mod, cubin));
    CK(cuModuleGetFunction(&f_fit, mod, "fit_all"));
    CK(cuModuleGetFunction(&f_agree, mod, "lanes_agree"));

    /* Data: per-voxel truths around a centre, Gaussian noise. */
    const int nvox = 256, P = DM_NPARAMS;
    int M; real *meas; real centre[DM_NPARAMS], sigma;
#if DM_NPARAMS == 2
    M = 32; meas = malloc(M * sizeof(real));
    for (int m = 0; m < M; m++) meas[m] = 0.005 + 0.005 * m;
    centre[0] = 1000; centre[1] = 25; sigma = 20;
#else
    M = 132; meas = malloc(M * 4 * sizeof(real));
    for (int m = 0; m < M; m++) {
        if (m < 4) { meas[m*4]=1; meas[m*4+1]=0; meas[m*4+2]=0; meas[m*4+3]=0; continue; }
        int i = (m - 4) % 64, shell = 1 + (m - 4) / 64;
        double z = 1 - (2.0 * i + 1) / 64, rr = sqrt(1 - z * z), a = i * 2.399963229728653 + shell;
        meas[m*4]=rr*cos(a); meas[m*4+1]=rr*sin(a); meas[m*4+2]=z; meas[m*4+3]=1000.0*shell;
    }
    centre[0]=1000; centre[1]=1.5e-3; centre[2]=0.5; centre[3]=1.1; centre[4]=2.0; sigma = 15;
#endif
    real *y = malloc(sizeof(real) * nvox * M), *start = malloc(sizeof(real) * nvox * P);
    dm_rng rng; dm_rng_init(&rng, 5, 5);
    for (int v = 0; v < nvox; v++) {
        real t[DM_NPARAMS], dummy = 0;
        for (int k = 0; k < P; k++) {
            t[k] = centre[k] * (1 + 0.1 * (dm_rng_uniform(&rng) - 0.5));
            start[v * P + k] = centre[k];
        }
        for (int m = 0; m < M; m++)
            y[v * M + m] = dm_signal(t, meas + m * DM_MEASURE_WIDTH, &dummy) + sigma * dm_rng_normal(&rng);
    }
    dm_fit_config cfg; memset(&cfg, 0, sizeof cfg);
    cfg.nmeas = M; cfg.methods = DM_METHOD_LM | DM_METHOD_MCMC; cfg.lm_max_iter = 200;
    cfg.burnin = 1000; cfg.jumps = 1250; cfg.sample_every = 25; cfg.update_every = 40; cfg.seed = 42;
    int ns = DM_NSAMPLES(&cfg);

    /* Host reference. */
    real *hp = malloc(sizeof(real) * nvox * P), *hs = malloc(sizeof(real) * nvox * ns * P), *hst = malloc(sizeof(real) * nvox * DM_NSTATS);
    int *hstatus = malloc(sizeof(int) * nvox);
    real dummy = 0;
    for (int v = 0; v < nvox; v++) {
        memcpy(hp + v * P, start + v * P, sizeof(real) * P);
        dm_voxel_data d = {M, meas, y + v * M, &dummy};
        hstatus[v] = dm_fit_one_voxel(&cfg, &dummy, &d, v, hp + v * P, hs + (long)v * ns * P, P, hst + v * DM_NSTATS);
    }

    CUdeviceptr d_meas, d_y, d_p, d_s, d_st, d_status, d_grid, d_start, d_out;
    CK(cuMemAlloc(&d_meas, sizeof(real) * M * DM_MEASURE_WIDTH)); CK(cuMemcpyHtoD(d_meas, meas, sizeof(real) * M * DM_MEASURE_WIDTH));
    CK(cuMemAlloc(&d_y, sizeof(real) * nvox * M)); CK(cuMemcpyHtoD(d_y, y, sizeof(real) * nvox * M));
    CK(cuMemAlloc(&d_p, sizeof(real) * nvox * P)); CK(cuMemcpyHtoD(d_p, start, sizeof(real) * nvox * P));
    CK(cuMemAlloc(&d_start, sizeof(real) * nvox * P)); CK(cuMemcpyHtoD(d_start, start, sizeof(real) * nvox * P));
    CK(cuMemAlloc(&d_s, sizeof(real) * nvox * ns * P)); CK(cuMemAlloc(&d_st, sizeof(real) * nvox * DM_NSTATS));
    CK(cuMemAlloc(&d_status, sizeof(int) * nvox)); CK(cuMemAlloc(&d_grid, 8));
    CK(cuMemAlloc(&d_out, sizeof(real) * nvox * nlanes * P));
    int threads = 128, blocks = (nvox * nlanes + threads - 1) / threads;
    void *args[] = {&cfg, &d_grid, &d_meas, &d_y, &d_p, &d_s, &d_st, &d_status, (void *)&nvox};
    CK(cuLaunchKernel(f_fit, blocks, 1, 1, threads, 1, 1, 0, 0, args, 0));
    CK(cuCtxSynchronize());
    real *gp = malloc(sizeof(real) * nvox * P), *gs = malloc(sizeof(real) * nvox * ns * P), *gst = malloc(sizeof(real) * nvox * DM_NSTATS);
    int *gstatus = malloc(sizeof(int) * nvox);
    CK(cuMemcpyDtoH(gp, d_p, sizeof(real) * nvox * P)); CK(cuMemcpyDtoH(gs, d_s, sizeof(real) * nvox * ns * P));
    CK(cuMemcpyDtoH(gst, d_st, sizeof(real) * nvox * DM_NSTATS)); CK(cuMemcpyDtoH(gstatus, d_status, sizeof(int) * nvox));

    int status_same = 1, samples_close = 0; double max_param_rel = 0;
    for (int v = 0; v < nvox; v++) {
        status_same &= hstatus[v] == gstatus[v];
        int close = 1;
        for (int i = 0; i < ns * P; i++) {
            double a = hs[(long)v * ns * P + i], b = gs[(long)v * ns * P + i];
            close &= fabs(a - b) <= 1e-6 * fabs(a) + 1e-12;
        }
        samples_close += close;
        for (int k = 0; k < P; k++) {
            double rel = fabs(hp[v * P + k] - gp[v * P + k]) / fabs(hp[v * P + k]);
            if (close && rel > max_param_rel) max_param_rel = rel;
        }
    }
    printf("%s gpu_status_equals_cpu\n", status_same ? "PASS" : "FAIL");
    printf("%s gpu_mcmc_samples_match_cpu: %d of %d voxels' chains equal to 1e-6 (lanes %d)\n",
           samples_close >= nvox * 9 / 10 ? "PASS" : "FAIL", samples_close, nvox, nlanes);
    printf("%s gpu_posterior_mean_matches_cpu: max relative difference %g\n", max_param_rel < 1e-6 ? "PASS" : "FAIL", max_param_rel);
    printf("info: voxel 0 cpu acc %g gpu acc %g; cpu S0 %.12g gpu S0 %.12g\n", hst[DM_STAT_ACCEPT], gst[DM_STAT_ACCEPT], hp[0], gp[0]);

    void *args2[] = {&cfg, &d_meas, &d_y, &d_start, &d_out, (void *)&nvox};
    CK(cuLaunchKernel(f_agree, blocks, 1, 1, threads, 1, 1, 0, 0, args2, 0));
    CK(cuCtxSynchronize());
    real *out = malloc(sizeof(real) * nvox * nlanes * P);
    CK(cuMemcpyDtoH(out, d_out, sizeof(real) * nvox * nlanes * P));
    int agree = 1;
    for (int v = 0; v < nvox; v++)
        for (int l = 1; l < nlanes; l++)
            agree &= memcmp(out + ((long)v * nlanes + l) * P, out + (long)v * nlanes * P, sizeof(real) * P) == 0;
    printf("%s gpu_lanes_agree_bitwise (lanes %d)\n", agree ? "PASS" : "FAIL", nlanes);

    /* timing of the full fit */
    CUevent e0, e1; cuEventCreate(&e0, 0); cuEventCreate(&e1, 0);
    CK(cuMemcpyHtoD(d_p, start, sizeof(real) * nvox * P));
    cuEventRecord(e0, 0);
    CK(cuLaunchKernel(f_fit, blocks, 1, 1, threads, 1, 1, 0, 0, args, 0));
    cuEventRecord(e1, 0); CK(cuCtxSynchronize());
    float ms; cuEventElapsedTime(&ms, e0, e1);
    printf("info: %d voxels LM+MCMC in %.2f ms on the GPU (lanes %d)\n", nvox, ms, nlanes);
    return 0;
}
