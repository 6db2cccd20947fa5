/* dimoc simulate: predicted signals of any model, with or without noise
 * (runtime/simulate/simulate.c). */
#include "args.h"
#include "cli.h"
#include "simulate/simulate.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

static const dm_opt sim_opts[] = {
    {"bvals", "FILE", NULL, "FSL b-values of the protocol"},
    {"bvecs", "FILE", NULL, "FSL gradient directions of the protocol"},
    {"params", "NAME=VALUE|MAP,..", NULL,
     "every parameter of the model, a constant or a 3D map" DM_REPEATABLE},
    {"voxel", "NAME=VALUE|MAP,..", NULL,
     "per-voxel inputs (their defaults otherwise)" DM_REPEATABLE},
    {"measure", "NAME=FILE", NULL, "per-measurement inputs of the model" DM_REPEATABLE},
    {"scheme", "FILE", NULL, "acquisition scheme: named columns, one row per volume"},
    {"noise", "none|gaussian|rician", "none", "noise added to the signal"},
    {"snr", "N", "30", "signal-to-noise ratio: sigma = (noise-free mean b=0 signal) / N"},
    {"seed", "N", "1", "random seed of the noise (Philox, keyed by seed and voxel)"},
    {"voxels", "N", "1", "voxels to simulate when no parameter is a map (an N x 1 x 1 image)"},
    {"out", "FILE", NULL, "the simulated 4D image (.nii or .nii.gz)"},
    {"mask-out", "FILE", NULL, "also write a mask of the simulated voxels"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_simulate(FILE *out)
{
    dm_args_help(
        out, "dimoc simulate MODEL --params NAME=VALUE|MAP,.. --out FILE [options]",
        "Evaluates MODEL in every voxel.  With parameter maps the output has their grid and\n"
        "geometry; with constants only, it is an N x 1 x 1 image (--voxels N), each voxel\n"
        "with its own noise.  sigma = S(b=0) / SNR, S(b=0) the voxel's noise-free mean\n"
        "signal at b <= 50 (its largest signal when the model reads no b-values).",
        sim_opts);
    return 0;
}

int dm_cmd_simulate(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("simulate", sim_opts, dm_help_simulate, argc, argv, &a) != 0)
        return dm_report_error();
    int rc = 0;
    dm_simulate_settings s = {0};
    const char *noise = dm_arg(&a, sim_opts, "noise");
    long seed = 1;
    s.snr = 30;
    s.voxels = 1;
    s.out = dm_arg(&a, sim_opts, "out");
    if (a.npositional != 1) {
        rc = dm_set_error("simulate: give exactly one MODEL (see 'dimoc help simulate')");
        goto done;
    }
    if (!s.out) {
        rc = dm_set_error("simulate: --out is required");
        goto done;
    }
    if (dm_arg_double(&a, sim_opts, "snr", &s.snr) ||
        dm_arg_long(&a, sim_opts, "seed", 0, 0x7fffffffffffffffL, &seed) ||
        dm_arg_long(&a, sim_opts, "voxels", 1, 100000000, &s.voxels)) {
        rc = -1;
        goto done;
    }
    s.noise = !strcmp(noise, "none")       ? DM_SIM_NOISE_NONE
              : !strcmp(noise, "gaussian") ? DM_SIM_NOISE_GAUSSIAN
              : !strcmp(noise, "rician")   ? DM_SIM_NOISE_RICIAN
                                           : -1;
    if (s.noise < 0 || (s.noise != DM_SIM_NOISE_NONE && !(s.snr > 0))) {
        rc = dm_set_error("simulate: --noise must be none, gaussian or rician, with --snr > 0");
        goto done;
    }
    s.model = a.positional[0];
    s.seed = (unsigned long long)seed;
    s.params = dm_arg(&a, sim_opts, "params");
    s.voxel = dm_arg(&a, sim_opts, "voxel");
    s.bvals = dm_arg(&a, sim_opts, "bvals");
    s.bvecs = dm_arg(&a, sim_opts, "bvecs");
    s.measure = dm_arg(&a, sim_opts, "measure");
    s.scheme = dm_arg(&a, sim_opts, "scheme");
    s.mask_out = dm_arg(&a, sim_opts, "mask-out");
    static const char *const inputs[] = {"bvals", "bvecs", "measure", "scheme", NULL};
    dm_provenance prov;
    dm_provenance_begin(&prov, "simulate");
    dm_provenance_args(&prov, &a, sim_opts, inputs);
    rc = dm_simulate_run(&s, &prov);
    dm_provenance_free(&prov);
done:
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
