/* The CSD solver's GPU programs (templates/csd/gpu_csd.cu with csd_solve.h, the source the host
 * solver also builds) compile with NVRTC, no GPU needed: single-shell in float and double and
 * multi-tissue with two and three tissues, lmax 8, for sm_90 (Hopper) and sm_80 (Ampere), as
 * `dimoc warm csd` compiles them. */
#include "csd/csd_gpu.h"
#include "gpu/cuda_api.h"
#include "util/error.h"

#include <stdio.h>

int main(void)
{
    dm_cuda *cu = dm_cuda_open(0, 1);
    if (!cu) {
        printf("FAIL nvrtc-load: %s\n", dm_last_error());
        return 1;
    }
    const int both[2] = {1, 1};
    const int archs[2] = {90, 80};
    for (int a = 0; a < 2; a++) {
        if (dm_csd_gpu_precompile(cu, archs[a], both, 1) == 0)
            printf("PASS nvrtc-csd-sm%d (single-shell float and double, msmt 2 and 3 tissues)\n",
                   archs[a]);
        else
            printf("FAIL nvrtc-csd-sm%d: %s\n", archs[a], dm_last_error());
    }
    dm_cuda_close(cu);
    return 0;
}
