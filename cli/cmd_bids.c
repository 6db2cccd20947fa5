/* dimoc bids BIDS_DIR OUTPUT_DIR participant|group [options]: the BIDS App (docs/studies.md),
 * a whole study in one process through the pipeline the user names, its options checked
 * against the same table `dimoc pipeline NAME` uses.  The command table is cli/'s:
 * runtime/study/ gets the stages' execution as a function (run_command). */
#include "args.h"
#include "cli.h"
#include "commands.h"
#include "fit/fit.h"
#include "gpu/gpu_device.h"
#include "io/formats.h"
#include "study/qc_group.h"
#include "study/study_plan.h"
#include "study/study_run.h"
#include "study/study_slurm.h"
#include "util/cmdline.h"
#include "util/error.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DIMOC_VERSION
#define DIMOC_VERSION "unknown"
#endif

static const dm_opt bids_opts[] = {
    {"participant-label", "LABEL", NULL,
     "the participants to process (with or without 'sub-'; several may follow one option); "
     "default: all" DM_REPEATABLE},
    {"session-label", "LABEL", NULL,
     "the sessions to process (with or without 'ses-'); default: all" DM_REPEATABLE},
    {"pipeline", "NAME", NULL,
     "a shipped pipeline ('dimoc help pipeline' lists them), csd or tractography; required "
     "at the participant level, a filter of the runs at the group level"},
    {"z-limit", "Z", "3.5", "group level: robust z beyond which a run is marked"},
    {"slurm-batch", "N", "1", "with --slurm: units (subject, session) per array task"},
};
enum { NBIDS = 5 };

/* The options of csd and tractography, the pipelines without a script. */
static const dm_opt builtin_opts[] = {
    {"threads", "N", "all cores", "CPU threads"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"device", "cpu|gpu|auto", "auto", "where to deconvolve and track"},
    {"gpus", "N", "0", "the GPU to use (its ordinal)"},
    {"lmax", "N", "8", "degree of the WM FOD (dimoc csd --lmax)"},
    {"select", "N", "5000", "tractography: streamlines to keep (dimoc track --select)"},
};

int dm_help_bids(FILE *out)
{
    fprintf(out,
            "usage: dimoc bids BIDS_DIR OUTPUT_DIR participant|group [--participant-label L ..]\n"
            "                  [--session-label S ..] --pipeline NAME [pipeline and fit options]\n"
            "                  [--slurm [--slurm-batch N] [cluster options]]\n\n"
            "A BIDS App: every sub-X/[ses-Y/]dwi/*_dwi.nii[.gz] of BIDS_DIR (its .bval, .bvec and\n"
            ".json by the inheritance principle; a mask from BIDS_DIR/derivatives/ named\n"
            "sub-X[_ses-Y]..._desc-brain_mask.nii[.gz], else one made by 'dimoc mask') through\n"
            "one pipeline, in ONE process: the driver and the GPU are started once, the next\n"
            "run's DWI is read while one fits, the pictures are drawn beside the next fit.\n"
            "Each (subject, session) appears whole in OUTPUT_DIR or not at all; a unit complete\n"
            "already is skipped, so a run that stopped is resumed by running it again.  The\n"
            "maps are named as BIDS derivatives (P_space-dwi_model-M_param-X_dwimap.nii.gz,\n"
            "P_qc.json, figures/; docs/studies.md).  Exit status 0 when every unit succeeded,\n"
            "1 when any failed (each in one line, listed again at the end).\n"
            "The group level gathers the qc files into OUTPUT_DIR/group/.\n\n"
            "options:\n");
    for (int i = 0; i < NBIDS; i++) dm_args_help_line(out, &bids_opts[i]);
    fprintf(out, "\ncluster options (as 'dimoc pipeline --slurm'; docs/cluster.md):\n");
    int n;
    const dm_opt *cl = dm_pipeline_cluster_options(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(cl[i].name, "parts")) dm_args_help_line(out, &cl[i]);
    fprintf(out, "\noptions of csd and tractography:\n");
    for (int i = 0; i < 6; i++) dm_args_help_line(out, &builtin_opts[i]);
    fprintf(out, "\nA shipped pipeline's options: 'dimoc help pipeline NAME' (all but --data, "
                 "--mask,\n--bvals, --bvecs, --grad and --out, which come from the dataset).\n");
    return 0;
}

/* Runs one dimoc command line in this process, through the command table: the stages of a
 * pipeline under `dimoc bids`.  The output formats are the process's, set by a command from
 * its --format: each stage starts from the defaults, as a command of its own would. */
typedef struct command_table {
    const dm_command *(*find)(const char *name);
} command_table;

static int run_command(int argc, char **argv, void *ctx)
{
    const command_table *t = ctx;
    const dm_command *c = argc > 0 ? t->find(argv[0]) : NULL;
    if (!c) return dm_set_error("no dimoc command '%s'", argc > 0 ? argv[0] : ""), 1;
    /* The command line a command records in its provenance.json is the process's: the
     * stage's own for its time (dimoc PROGRAM CMD ARGS), then ours again. */
    int pargc;
    char **pargv = dm_command_argv(&pargc);
    char **line = calloc((size_t)argc + 2, sizeof *line);
    line[0] = pargc > 0 ? pargv[0] : "dimoc";
    memcpy(line + 1, argv, (size_t)argc * sizeof *line);
    dm_set_command_line(argc + 1, line);
    dm_formats_set(DM_IMAGE_NII_GZ, DM_TRACTS_TCK);
    int status = c->run(argc - 1, argv + 1);
    dm_formats_set(DM_IMAGE_NII_GZ, DM_TRACTS_TCK);
    dm_set_command_line(pargc, pargv);
    free(line);
    return status;
}

/* argv with BIDS-Apps' "--participant-label 01 02" spelt as one option per value. */
/* The fits' deferred last writes, handed to the study (fit/fit.h). */
static void *take_fit_writes(void)
{
    return dm_fit_deferred_take();
}

static int join_fit_writes(void *writes)
{
    return dm_fit_deferred_join(writes);
}

static char **split_label_lists(int argc, char **argv, int *nout)
{
    char **w = calloc((size_t)argc * 2 + 1, sizeof *w);
    int n = 0;
    for (int i = 0; i < argc; i++) {
        w[n++] = argv[i];
        if (strcmp(argv[i], "--participant-label") && strcmp(argv[i], "--session-label")) continue;
        const char *opt = argv[i];
        if (i + 1 < argc) w[n++] = argv[++i];
        while (i + 1 < argc && argv[i + 1][0] != '-') {
            w[n++] = (char *)opt;
            w[n++] = argv[++i];
        }
    }
    *nout = n;
    return w;
}

/* The value of --NAME in argv (either spelling), or NULL. */
static const char *find_value(int argc, char **argv, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < argc; i++)
        if (!strncmp(argv[i], "--", 2) && !strncmp(argv[i] + 2, name, n)) {
            if (argv[i][2 + n] == '=') return argv[i] + 3 + n;
            if (!argv[i][2 + n] && i + 1 < argc) return argv[i + 1];
        }
    return NULL;
}

/* The comma-joined values of a repeatable option as a list (malloc'd copy in *buf). */
static int split_commas(const char *v, char **buf, const char ***list)
{
    *buf = v ? strdup(v) : NULL;
    *list = calloc(v ? strlen(v) + 2 : 1, sizeof **list);
    int n = 0;
    char *save = NULL;
    for (char *t = *buf ? strtok_r(*buf, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
        (*list)[n++] = t;
    return n;
}

int dm_cmd_bids(int argc, char **argv, const dm_command *(*find)(const char *name))
{
    command_table commands = {find};
    if (argc < 1) {
        dm_help_bids(stderr);
        return 2;
    }
    int nw;
    char **w = split_label_lists(argc, argv, &nw);
    const char *pname = find_value(nw, w, "pipeline");
    dm_pipeline_def *def = NULL;
    int rc = 0;
    /* The table: bids' own options, the cluster options, the pipeline's. */
    dm_opt table[DM_MAX_OPTS];
    int n = 0, ncl;
    for (int i = 0; i < NBIDS; i++) table[n++] = bids_opts[i];
    const dm_opt *cl = dm_pipeline_cluster_options(&ncl);
    for (int i = 0; i < ncl; i++)
        if (strcmp(cl[i].name, "parts")) table[n++] = cl[i];
    int first_passed = n; /* the options passed on to the pipeline start here */
    if (pname && dm_study_builtin_pipeline(pname)) {
        int count = !strcmp(pname, "tractography") ? 6 : 5;
        for (int i = 0; i < count; i++) table[n++] = builtin_opts[i];
    } else if (pname) {
        def = dm_pipeline_def_load(pname);
        if (!def) rc = -1;
        if (rc == 0) n += dm_pipeline_def_options(def, table + n, DM_MAX_OPTS - n);
    }
    table[n] = (dm_opt){NULL, NULL, NULL, NULL};
    dm_args a;
    memset(&a, 0, sizeof a);
    if (rc == 0) rc = dm_args_parse("bids", table, dm_help_bids, nw, w, &a);
    const char *level = rc == 0 && a.npositional >= 3 ? a.positional[2] : NULL;
    if (rc == 0 && a.npositional != 3)
        rc = dm_set_error("bids: give BIDS_DIR OUTPUT_DIR and the level, participant or group (%d "
                          "argument%s given; see 'dimoc help bids')",
                          a.npositional, a.npositional == 1 ? "" : "s");
    if (rc == 0 && strcmp(level, "participant") && strcmp(level, "group"))
        rc = dm_set_error("bids: the level must be participant or group, not '%s'", level);
    int participant = rc == 0 && !strcmp(level, "participant");
    if (rc == 0 && participant && !pname)
        rc = dm_set_error("bids: --pipeline NAME is required at the participant level (see "
                          "'dimoc help bids')");
    int slurm = rc == 0 && dm_arg_given(&a, table, "slurm");
    for (int i = 1; rc == 0 && !slurm && i < ncl; i++)
        if (strcmp(cl[i].name, "parts") && dm_arg_given(&a, table, cl[i].name))
            rc = dm_set_error("bids: --%s is only valid with --slurm (see 'dimoc help bids')",
                              cl[i].name);
    if (rc == 0 && !slurm && dm_arg_given(&a, table, "slurm-batch"))
        rc = dm_set_error("bids: --slurm-batch is only valid with --slurm (see 'dimoc help bids')");
    if (rc == 0 && slurm && !participant)
        rc = dm_set_error("bids: --slurm runs the participant level; run the group level "
                          "after its jobs, without --slurm");
    if (rc != 0) {
        dm_args_free(&a);
        dm_pipeline_def_free(def);
        free(w);
        return dm_report_error();
    }
    const char *bids_dir = a.positional[0], *out_dir = a.positional[1];

    if (!participant) {
        double z = 0;
        dm_study_group_options go = {pname, DM_STUDY_Z_LIMIT_DEFAULT};
        rc = dm_arg_double(&a, table, "z-limit", &z);
        if (rc == 0) go.z_limit = z;
        if (rc == 0) rc = dm_study_group(out_dir, &go);
        dm_args_free(&a);
        dm_pipeline_def_free(def);
        free(w);
        return rc == 0 ? 0 : dm_report_error();
    }

    /* The words passed on: every option of the pipeline's part of the table, as given. */
    char **pass = calloc((size_t)nw + 1, sizeof *pass);
    int npass = 0;
    for (int k = 0; k < nw; k++) {
        const char *s = w[k];
        if (strncmp(s, "--", 2)) continue;
        const char *name = s + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int at = -1;
        for (int i = 0; table[i].name && at < 0; i++)
            if (strlen(table[i].name) == len && !strncmp(table[i].name, name, len)) at = i;
        if (at < 0) continue;
        const char *value = table[at].arg ? (eq ? eq + 1 : w[++k]) : NULL;
        if (at < first_passed) continue;
        pass[npass] = malloc(len + 3);
        snprintf(pass[npass++], len + 3, "--%.*s", (int)len, name);
        if (value) pass[npass++] = strdup(value);
    }
    char *sbuf, *ebuf;
    const char **subjects, **sessions;
    int nsub = split_commas(dm_arg(&a, table, "participant-label"), &sbuf, &subjects);
    int nses = split_commas(dm_arg(&a, table, "session-label"), &ebuf, &sessions);
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    char *cmdline = dm_command_line();
    long threads = 0;
    if (dm_arg_given(&a, table, "threads"))
        rc = dm_arg_long(&a, table, "threads", 1, 4096, &threads);

    if (rc == 0 && slurm) {
        long batch = 1;
        rc = dm_arg_long(&a, table, "slurm-batch", 1, 100000, &batch);
        dm_study_slurm_options so = {.partition = dm_arg(&a, table, "partition"),
                                     .time = dm_arg(&a, table, "time"),
                                     .account = dm_arg(&a, table, "account"),
                                     .gpus_per_task = dm_arg(&a, table, "gpus-per-task"),
                                     .cpus_per_task = dm_arg(&a, table, "cpus-per-task"),
                                     .setup = dm_arg(&a, table, "slurm-setup"),
                                     .dry_run = dm_arg_given(&a, table, "dry-run"),
                                     .batch = (int)batch,
                                     .program = self,
                                     .pipeline = pname,
                                     .args = pass,
                                     .nargs = npass,
                                     .subjects = subjects,
                                     .nsubjects = nsub,
                                     .sessions = sessions,
                                     .nsessions = nses};
        if (rc == 0) rc = dm_study_slurm_submit(bids_dir, out_dir, &so, stdout);
        rc = rc == 0 ? 0 : dm_report_error();
    } else if (rc == 0) {
        /* The GPU's context made once for every stage of every run. */
        const char *device = dm_arg(&a, table, "device");
        if (!device || strcmp(device, "cpu")) {
            if (dm_gpu_available()) dm_gpu_hold_contexts(dm_arg(&a, table, "gpus"));
        }
        setenv("DIMOC", self, 1);
        setenv("DIMOC_PROGRAM", self, 1);
        dm_study_options o = {.bids_dir = bids_dir,
                              .output_dir = out_dir,
                              .pipeline = pname,
                              .script = def ? dm_pipeline_def_script(def) : NULL,
                              .args = pass,
                              .nargs = npass,
                              .subjects = subjects,
                              .nsubjects = nsub,
                              .sessions = sessions,
                              .nsessions = nses,
                              .program = self,
                              .version = DIMOC_VERSION,
                              .command_line = cmdline,
                              .threads = (int)threads,
                              .exec = run_command,
                              .exec_ctx = &commands,
                              .take_writes = take_fit_writes,
                              .join_writes = join_fit_writes};
        /* A fit's last maps are written beside the next run's fits. */
        dm_fit_defer_final_writes(1);
        rc = dm_study_participant(&o);
        dm_fit_defer_final_writes(0);
        if (rc < 0) rc = dm_report_error();
    } else {
        rc = dm_report_error();
    }
    for (int i = 0; i < npass; i++) free(pass[i]);
    free(pass), free(sbuf), free(ebuf), free(subjects), free(sessions), free(cmdline);
    dm_args_free(&a);
    dm_pipeline_def_free(def);
    free(w);
    return rc;
}
