/* dimoc's commands: one row each, read by main()'s dispatch, `dimoc help` and the usage text. */
#include "commands.h"
#include "cli.h"

#include <string.h>

#ifndef DIMOC_VERSION
#define DIMOC_VERSION "unknown"
#endif

static int run_help(int argc, char **argv);
static int run_version(int argc, char **argv);
static int run_bids(int argc, char **argv);

const dm_command dm_commands[] = {
    {"check", NULL, "model design", "check FILE.model", "validate a model and print its summary",
     dm_cmd_check, dm_help_check},
    {"compile", NULL, "model design", "compile FILE.model [-o DIR]",
     "write its generated source (model.h) and metadata", dm_cmd_compile, dm_help_compile},
    {"info", NULL, "model design", "info [MODEL]",
     "describe a shipped or file model (no MODEL: list them)", dm_cmd_info, dm_help_info},
    {"warm", NULL, "model design", "warm [MODEL...]",
     "compile fitters into the cache before the first fit", dm_cmd_warm, dm_help_warm},
    {"fit", NULL, "data", "fit MODEL --data .. --out ..",
     "fit a model voxel by voxel (grid, LM, MCMC)", dm_cmd_fit, dm_help_fit},
    {"simulate", NULL, "data", "simulate MODEL ..",
     "predicted signals of a model, with or without noise", dm_cmd_simulate, dm_help_simulate},
    {"scheme", NULL, "data", "scheme --shells .. ..",
     "generate a multi-shell gradient scheme (bvals, bvecs)", dm_cmd_scheme, dm_help_scheme},
    {"phantom", NULL, "data", "phantom --out DIR",
     "a crossing-fibre phantom: parameter maps and a mask", dm_cmd_phantom, dm_help_phantom},
    {"compare", NULL, "data", "compare --truth DIR --fit DIR",
     "compare fitted maps with the truth, as a table", dm_cmd_compare, dm_help_compare},
    {"dti", NULL, "data", "dti --data .. --out DIR",
     "linear (weighted least squares) tensor fit, FSL dtifit names", dm_cmd_dti, dm_help_dti},
    {"mask", NULL, "data", "mask --data .. --out MASK",
     "a brain mask from the DWI itself (MRtrix's dwi2mask)", dm_cmd_mask, dm_help_mask},
    {"angles", NULL, "data", "angles V1.nii.gz --out DIR",
     "directions as th, ph (and psi) maps, to start a fit from", dm_cmd_angles, dm_help_angles},
    {"response", NULL, "data", "response --data .. --out DIR",
     "response functions for CSD (tournier, dhollander, fa)", dm_cmd_response, dm_help_response},
    {"csd", NULL, "data", "csd --data .. --out DIR",
     "FODs by constrained spherical deconvolution (single-, multi-shell)", dm_cmd_csd, dm_help_csd},
    {"peaks", NULL, "data", "peaks FOD.nii.gz --out DIR",
     "FOD peaks per voxel: sh2peaks layout and FSL dyads", dm_cmd_peaks, dm_help_peaks},
    {"tdi", NULL, "data", "tdi TRACKS.tck --template ..",
     "track-density image of a tractogram (tckmap's default)", dm_cmd_tdi, dm_help_tdi},
    {"connectome", NULL, "data", "connectome TRACKS --parc F",
     "streamline counts and mean lengths between parcels", dm_cmd_connectome, dm_help_connectome},
    {"commit", NULL, "data", "commit --tractogram T.tck --data ..",
     "tractogram filtering: a weight per streamline (COMMIT)", dm_cmd_commit, dm_help_commit},
    {"track", NULL, "data", "track --samples DIR --seed ..",
     "probabilistic tractography (probtrackx-style)", dm_cmd_track, dm_help_track},
    {"view", NULL, "data", "view MAP.nii.gz -o map.png",
     "quick-look picture of the three mid-slices", dm_cmd_view, dm_help_view},
    {"select", NULL, "data", "select BIC1 BIC2 .. --out F",
     "per voxel, the model with the lowest BIC (or AIC)", dm_cmd_select, dm_help_select},
    {"merge", NULL, "data", "merge PART_DIR.. --out DIR",
     "join the outputs of a run split by --part K/N", dm_cmd_merge, dm_help_merge},
    {"pipeline", NULL, "data", "pipeline NAME --data .. ..",
     "run a shipped pipeline (pipelines/NAME.sh), e.g. bedpostx", dm_cmd_pipeline,
     dm_help_pipeline},
    {"bids", NULL, "data", "bids BIDS_DIR OUT participant",
     "a BIDS App: a whole study through one pipeline, in one process", run_bids, dm_help_bids},
    /* Listed last, under the heading before it, as it always was. */
    {"help", "--help -h", "data", "help [COMMAND]",
     "this text, or a command's options with their defaults", run_help, NULL},
    {"version", "--version", NULL, NULL, "the program's version", run_version, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};

/* 1 when `name` is one of the space-separated words of `list`. */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && n && !strncmp(p, name, n)) return 1;
        p += len;
        p += strspn(p, " ");
    }
    return 0;
}

const dm_command *dm_command_find(const char *name)
{
    for (const dm_command *c = dm_commands; c->name; c++)
        if (!strcmp(c->name, name) || in_list(c->aliases, name)) return c;
    return NULL;
}

void dm_print_usage(FILE *out)
{
    fputs("dimoc " DIMOC_VERSION ": a model compiler and fitter for diffusion MRI\n"
          "\n"
          "usage: dimoc COMMAND [ARGS]\n"
          "\n",
          out);
    const char *group = NULL;
    for (const dm_command *c = dm_commands; c->name; c++) {
        if (!c->group) continue;
        if (!group || strcmp(group, c->group)) fprintf(out, "%s:\n", c->group);
        group = c->group;
        fprintf(out, "  %-29s %s\n", c->synopsis, c->summary);
    }
}

/* dimoc bids runs other commands in its process: it gets the table's lookup. */
static int run_bids(int argc, char **argv)
{
    return dm_cmd_bids(argc, argv, dm_command_find);
}

static int run_help(int argc, char **argv)
{
    if (argc < 1) {
        dm_print_usage(stdout);
        return 0;
    }
    const dm_command *c = dm_command_find(argv[0]);
    if (c && !c->help && argc == 1) { /* help, version */
        dm_print_usage(stdout);
        return 0;
    }
    if (!c || !c->help) {
        fprintf(stderr, "dimoc: error: no help for unknown command '%s' (see 'dimoc help')\n",
                argv[0]);
        return 1;
    }
    if (argc == 2 && c->help == dm_help_pipeline) return dm_help_pipeline_named(stdout, argv[1]);
    if (argc > 1) {
        fprintf(stderr, "dimoc: error: help: one COMMAND at a time, not '%s' (see 'dimoc help')\n",
                argv[1]);
        return 1;
    }
    return c->help(stdout);
}

static int run_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("dimoc %s\n", DIMOC_VERSION);
    return 0;
}
