/* The whole GPU fitters (model + templates + kernels) compile with NVRTC, no GPU needed:
 * every shipped model in float for sm_90 (Hopper), and the smallest model also in double and
 * for sm_80 (Ampere); and the stage programs of the NODDI cascades' stages (the parameters a
 * stage holds made constants of its program, dm_model_stage) in float and double.
 * (test_nvrtc compiles every model's functions in both precisions.) */
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
                /* every method: the grid and LM program, and MCMC's own */
                dm_fit_gpu_programs progs;
                int rc = dm_fit_gpu_compile_parts(cu, &mi, archs[a], rs, 8, 7, -1, 0, &progs);
                if (rc == 0 && progs.n == 2 && progs.part[0].size > 1000 &&
                    progs.part[1].size > 1000)
                    printf("PASS nvrtc-%s-%s-sm%d (%zu + %zu byte cubins, %.1f s)\n", models[i],
                           rs == 4 ? "float" : "double", archs[a], progs.part[0].size,
                           progs.part[1].size, progs.compile_seconds);
                else
                    printf("FAIL nvrtc-%s-%s-sm%d: %s\n", models[i], rs == 4 ? "float" : "double",
                           archs[a], rc ? dm_last_error() : "not two programs");
                if (rc == 0) dm_fit_gpu_programs_free(&progs);
            }
        }
        dm_model_info_free(&mi);
    }
    /* The NODDI cascades' stages: the grid with the orientation held (S0 too: not gridded),
     * LM on the fractions, and NODDI-Bingham's grid and LM on its dispersion. */
    static const struct {
        const char *model, *held;
        int methods;
    } stages[] = {{"noddi_watson", "S0,th,ph", 1},
                  {"noddi_watson", "S0,kappa,th,ph", 2},
                  {"noddi_bingham", "S0,fintra,fiso,th,ph,psi", 1},
                  {"noddi_bingham", "S0,fintra,fiso,th,ph", 2}};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        dm_model_info mi, smi;
        if (dm_model_load(stages[i].model, &mi) != 0) {
            printf("FAIL load-%s: %s\n", stages[i].model, dm_last_error());
            continue;
        }
        unsigned held = 0;
        char names[128];
        snprintf(names, sizeof names, "%s", stages[i].held);
        for (char *t = strtok(names, ","); t; t = strtok(NULL, ","))
            held |= 1u << dm_model_param_index(&mi, t);
        if (dm_model_stage(&mi, held, &smi) != 0) {
            printf("FAIL stage-%s-%s: %s\n", stages[i].model, stages[i].held, dm_last_error());
            dm_model_info_free(&mi);
            continue;
        }
        for (int rs = 4; rs <= 8; rs += 4) {
            dm_fit_gpu_programs progs;
            int rc =
                dm_fit_gpu_compile_parts(cu, &smi, 90, rs, 2, stages[i].methods, -1, 0, &progs);
            if (rc == 0 && progs.n == 1 && progs.part[0].size > 1000 && smi.stage_width > 0)
                printf("PASS nvrtc-stage-%s-%s-%s (%zu byte cubin, %d stage values, %d fixed, "
                       "%.1f s)\n",
                       stages[i].model, stages[i].held, rs == 4 ? "float" : "double",
                       progs.part[0].size, smi.stage_width, smi.fix_width, progs.compile_seconds);
            else
                printf("FAIL nvrtc-stage-%s-%s-%s: %s\n", stages[i].model, stages[i].held,
                       rs == 4 ? "float" : "double", rc ? dm_last_error() : "no stage program");
            if (rc == 0) dm_fit_gpu_programs_free(&progs);
        }
        dm_model_info_free(&smi);
        dm_model_info_free(&mi);
    }
    dm_cuda_close(cu);
    return 0;
}
