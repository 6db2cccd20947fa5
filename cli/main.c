/* dimoc: the command-line program, a thin layer over the compiler and runtime libraries. */
#include "cli.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DIMOC_VERSION
#define DIMOC_VERSION "unknown"
#endif

static int g_argc;
static char **g_argv;

static const char *usage_text =
    "dimoc " DIMOC_VERSION ": a model compiler and fitter for diffusion MRI\n"
    "\n"
    "usage: dimoc COMMAND [ARGS]\n"
    "\n"
    "model design:\n"
    "  check FILE.model              validate a model and print its summary\n"
    "  compile FILE.model [-o DIR]   write its C and CUDA sources and metadata\n"
    "  info [MODEL]                  describe a shipped or file model (no MODEL: list them)\n"
    "data:\n"
    "  fit MODEL --data .. --out ..  fit a model voxel by voxel (grid, LM, MCMC)\n"
    "  simulate MODEL ..             predicted signals of a model, with or without noise\n"
    "  scheme --shells .. ..         generate a multi-shell gradient scheme (bvals, bvecs)\n"
    "  phantom --out DIR             a crossing-fibre phantom: parameter maps and a mask\n"
    "  compare --truth DIR --fit DIR compare fitted maps with the truth, as a table\n"
    "  dti --data .. --out DIR       linear (weighted least squares) tensor fit, FSL dtifit names\n"
    "  angles V1.nii.gz --out DIR    directions as th, ph (and psi) maps, to start a fit from\n"
    "  track --samples DIR --seed .. probabilistic tractography (probtrackx-style)\n"
    "  view MAP.nii.gz -o map.png    quick-look picture of the three mid-slices\n"
    "  select BIC1 BIC2 .. --out F   per voxel, the model with the lowest BIC (or AIC)\n"
    "  pipeline NAME ARGS..          run a shipped pipeline (pipelines/NAME.sh), e.g. bedpostx\n"
    "  help [COMMAND]                this text, or a command's options with their defaults\n";

int dm_report_error(void)
{
    fprintf(stderr, "dimoc: error: %s\n", dm_last_error());
    return 1;
}

char *dm_command_line(void)
{
    size_t n = 1;
    for (int i = 0; i < g_argc; i++) n += strlen(g_argv[i]) * 2 + 3;
    char *s = malloc(n), *o = s;
    for (int i = 0; i < g_argc; i++) {
        const char *a = g_argv[i];
        int quote = strpbrk(a, " \t\"'$\\;&|<>*?") != NULL || !*a;
        if (i) *o++ = ' ';
        if (quote) *o++ = '\'';
        for (; *a; a++) {
            if (*a == '\'' && quote) {
                memcpy(o, "'\\''", 4);
                o += 4;
            } else {
                *o++ = *a;
            }
        }
        if (quote) *o++ = '\'';
    }
    *o = 0;
    return s;
}

static int help(int argc, char **argv)
{
    if (argc < 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    const char *c = argv[0];
    if (!strcmp(c, "fit")) return dm_help_fit(stdout);
    if (!strcmp(c, "simulate")) return dm_help_simulate(stdout);
    if (!strcmp(c, "scheme")) return dm_help_scheme(stdout);
    if (!strcmp(c, "phantom")) return dm_help_phantom(stdout);
    if (!strcmp(c, "compare")) return dm_help_compare(stdout);
    if (!strcmp(c, "dti")) return dm_help_dti(stdout);
    if (!strcmp(c, "track")) return dm_help_track(stdout);
    if (!strcmp(c, "view")) return dm_help_view(stdout);
    if (!strcmp(c, "pipeline")) return dm_help_pipeline(stdout);
    if (!strcmp(c, "select")) return dm_help_select(stdout);
    if (!strcmp(c, "angles")) return dm_help_angles(stdout);
    if (!strcmp(c, "check") || !strcmp(c, "compile") || !strcmp(c, "info")) {
        fputs(usage_text, stdout);
        printf("\nThe model language: docs/model-language.md\n");
        return 0;
    }
    fprintf(stderr, "dimoc: error: no help for unknown command '%s'\n", c);
    return 1;
}

int main(int argc, char **argv)
{
    g_argc = argc;
    g_argv = argv;
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    int n = argc - 2;
    char **rest = argv + 2;
    if (!strcmp(cmd, "check")) return dm_cmd_check(n, rest);
    if (!strcmp(cmd, "compile")) return dm_cmd_compile(n, rest);
    if (!strcmp(cmd, "info")) return dm_cmd_info(n, rest);
    if (!strcmp(cmd, "fit")) return dm_cmd_fit(n, rest);
    if (!strcmp(cmd, "simulate")) return dm_cmd_simulate(n, rest);
    if (!strcmp(cmd, "scheme")) return dm_cmd_scheme(n, rest);
    if (!strcmp(cmd, "phantom")) return dm_cmd_phantom(n, rest);
    if (!strcmp(cmd, "compare")) return dm_cmd_compare(n, rest);
    if (!strcmp(cmd, "dti")) return dm_cmd_dti(n, rest);
    if (!strcmp(cmd, "track")) return dm_cmd_track(n, rest);
    if (!strcmp(cmd, "view")) return dm_cmd_view(n, rest);
    if (!strcmp(cmd, "pipeline")) return dm_cmd_pipeline(n, rest);
    if (!strcmp(cmd, "select")) return dm_cmd_select(n, rest);
    if (!strcmp(cmd, "angles")) return dm_cmd_angles(n, rest);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) return help(n, rest);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("dimoc %s\n", DIMOC_VERSION);
        return 0;
    }
    fprintf(stderr, "dimoc: error: unknown command '%s' (see 'dimoc help')\n", cmd);
    return 2;
}
