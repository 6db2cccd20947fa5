/* The whole GPU fitters (model + templates + kernels) compile with NVRTC, no GPU needed:
 * every shipped model in float for sm_90 (Hopper), and the smallest model also in double and
 * for sm_80 (Ampere).  (test_nvrtc compiles every model's functions in both precisions.) */
#include "gpu/cuda_api.h"
#include "util/error.h"
#include "fit/fit_gpu.h"
#include "model/model_info.h"

#include <stdio.h>
#include <string.h>

static const char *models[] = {"exp_decay",
                               "ball_1_stick",
                               "ball_2_sticks",
                               "watson_zeppelin",
                               "noddi_watson",
                               "noddi_bingham",
                               NULL};

int main(void)
{
    dm_cuda *cu = dm_cuda_open(0, 1);
    if (!cu) {
        printf("FAIL nvrtc-load: %s\n", dm_last_error());
        return 1;
    }
    for (int i = 0; models[i]; i++) {
        dm_model_info mi;
        if (dm_model_load(models[i], &mi) != 0) {
            printf("FAIL load-%s: %s\n", models[i], dm_last_error());
            continue;
        }
        for (int rs = 4; rs <= (i == 0 ? 8 : 4); rs += 4) {
            int archs[2] = {90, 80};
            for (int a = 0; a < (i == 0 ? 2 : 1); a++) {
                dm_gpu_program prog;
                int rc = dm_fit_gpu_compile(cu, &mi, archs[a], rs, 8, 7, -1, 0, &prog);
                if (rc == 0 && prog.size > 1000)
                    printf("PASS nvrtc-%s-%s-sm%d (%zu byte cubin, %.1f s)\n", models[i],
                           rs == 4 ? "float" : "double", archs[a], prog.size, prog.compile_seconds);
                else
                    printf("FAIL nvrtc-%s-%s-sm%d: %s\n", models[i], rs == 4 ? "float" : "double",
                           archs[a], dm_last_error());
                dm_gpu_program_free(&prog);
            }
        }
        dm_model_info_free(&mi);
    }
    dm_cuda_close(cu);
    return 0;
}
