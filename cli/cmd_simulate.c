/* The commands that make data: dimoc simulate (predicted signals of any model, with or without
 * noise: runtime/simulate/simulate_files.c over the engine of simulate.c), dimoc phantom (a small ball & two sticks phantom with
 * known truth, for the demo and tests: runtime/simulate/phantom.c) and dimoc scheme
 * (multi-shell gradient schemes: runtime/simulate/scheme.c). */
#include "args.h"
#include "cli.h"
#include "io/formats.h"
#include "io/textio.h"
#include "simulate/phantom.h"
#include "simulate/scheme.h"
#include "simulate/simulate.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
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
    {"mask", "FILE", NULL, "3D mask on the maps' grid: simulate where non-zero (0 elsewhere)"},
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
    s.mask = dm_arg(&a, sim_opts, "mask");
    s.mask_out = dm_arg(&a, sim_opts, "mask-out");
    static const char *const inputs[] = {"bvals", "bvecs", "measure", "scheme", "mask", NULL};
    dm_provenance prov;
    dm_provenance_begin(&prov, "simulate");
    dm_provenance_args(&prov, &a, sim_opts, inputs);
    rc = dm_simulate_run(&s, &prov);
    dm_provenance_free(&prov);
done:
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

/* ---- dimoc phantom ---- */

static const dm_opt phantom_opts[] = {
    {"out", "DIR", NULL, "folder for the truth maps, regions.nii.gz and mask.nii.gz"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"size", "N", "6", "each region is N x N x 2 voxels"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_phantom(FILE *out)
{
    dm_args_help(
        out, "dimoc phantom --out DIR [--size N]",
        "Writes ball_2_sticks parameter maps (S0 d f1 th1 ph1 f2 th2 ph2), the fibre\n"
        "directions dyads1/dyads2, regions.nii.gz (1 one fibre, 2 crossing at 90 degrees,\n"
        "3 crossing at 60 degrees, 4 free water) and mask.nii.gz.  Simulate with\n"
        "'dimoc simulate ball_2_sticks --params S0=DIR/S0.nii.gz,...'.",
        phantom_opts);
    return 0;
}

int dm_cmd_phantom(int argc, char **argv)
{
    dm_args a;
    long n = 6;
    if (dm_args_parse("phantom", phantom_opts, dm_help_phantom, argc, argv, &a) != 0 ||
        dm_arg_long(&a, phantom_opts, "size", 1, 256, &n) != 0)
        return dm_report_error();
    const char *dir = dm_arg(&a, phantom_opts, "out");
    dm_provenance prov;
    dm_provenance_begin(&prov, "phantom");
    int rc =
        dir ? dm_phantom_write(dir, (int)n, &prov) : dm_set_error("phantom: --out is required");
    dm_provenance_free(&prov);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}

/* ---- dimoc scheme ---- */

static const dm_opt scheme_opts[] = {
    {"shells", "COUNTxB,..", "5x0,50x1000,50x2000", "shells: directions x b-value (s/mm^2)"},
    {"bvals", "FILE", NULL, "output b-values (one row)"},
    {"bvecs", "FILE", NULL, "output directions (three rows)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_scheme(FILE *out)
{
    dm_args_help(
        out, "dimoc scheme [--shells 5x0,50x1000,50x2000] --bvals FILE --bvecs FILE",
        "Writes an FSL-style scheme; each shell's directions are spread over the sphere by\n"
        "electrostatic repulsion (antipodally symmetric), deterministically.",
        scheme_opts);
    return 0;
}

int dm_cmd_scheme(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("scheme", scheme_opts, dm_help_scheme, argc, argv, &a) != 0)
        return dm_report_error();
    const char *bvals = dm_arg(&a, scheme_opts, "bvals"), *bvecs = dm_arg(&a, scheme_opts, "bvecs");
    int rc;
    if (!bvals || !bvecs) {
        rc = dm_set_error("scheme: --bvals and --bvecs are required");
    } else {
        int n;
        double *b, *g;
        rc = dm_scheme_make(dm_arg(&a, scheme_opts, "shells"), &n, &b, &g);
        if (rc == 0) rc = dm_write_bvals_bvecs(bvals, bvecs, n, b, g);
        if (rc == 0) {
            free(b);
            free(g);
        }
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
