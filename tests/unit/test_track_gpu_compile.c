/* The GPU tracker (templates/track/gpu_tracker.cu: track_kernel.h + track_gpu_gather.h) compiles
 * with NVRTC for sm_90 (Hopper) and sm_80 (Ampere), no GPU needed, and exports the kernel that
 * runtime/track/track_gpu.c launches. */
#include "gpu/cuda_api.h"
#include "util/error.h"
#include "track/track_gpu.h"

#include <stdio.h>
#include <string.h>

/* 1 when the cubin's symbol table names the kernel (an ELF string, NUL-delimited). */
static int names_kernel(const dm_gpu_program *p)
{
    const char *want = "dm_track_kernel";
    size_t n = strlen(want);
    for (size_t i = 0; i + n < p->size; i++)
        if (!memcmp(p->cubin + i, want, n) && p->cubin[i + n] == 0) return 1;
    return 0;
}

int main(void)
{
    dm_cuda *cu = dm_cuda_open(0, 1);
    if (!cu) {
        printf("FAIL nvrtc-load: %s\n", dm_last_error());
        return 1;
    }
    int archs[2] = {90, 80};
    for (int a = 0; a < 2; a++) {
        dm_gpu_program prog;
        int rc = dm_track_gpu_compile(cu, archs[a], 0, &prog);
        if (rc == 0 && prog.size > 1000 && names_kernel(&prog))
            printf("PASS nvrtc-tracker-sm%d (%zu byte cubin, %.1f s)\n", archs[a], prog.size,
                   prog.compile_seconds);
        else
            printf("FAIL nvrtc-tracker-sm%d: %s\n", archs[a],
                   rc ? dm_last_error() : "no dm_track_kernel in the cubin");
        dm_gpu_program_free(&prog);
    }
    dm_cuda_close(cu);
    return 0;
}
