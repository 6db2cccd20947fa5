/* dimoc pipeline NAME --data .. --out .. [options]: runs a shipped pipeline, the shell script
 * pipelines/NAME.sh (found like the shipped models: the build tree's pipelines/, or
 * share/dimoc/pipelines when installed), with DIMOC set to this program so that the script's
 * dimoc calls run the same build.
 *
 * Every pipeline takes --data, --mask, --bvals, --bvecs and --out, its own options and the
 * options of `dimoc fit` it passes on.  The script declares its own in its leading comment:
 *
 *   # usage: dimoc pipeline NAME --data DWI ... [--mcmc] [fit options]
 *   # options:
 *   #   --mcmc                MCMC after the last stage [default: ...]
 *   #   --nfibres N           fibres per voxel: 1, 2 or 3 [default: 2]
 *   # fit options: every 'dimoc fit' option but --method --init-from     (or: none)
 *
 * (an option's name and placeholder, then two spaces or more, then its help).  This file
 * parses that block into an option table, checks the command line against it (unknown,
 * repeated or valueless options, missing or unreadable inputs) before the script starts, and
 * hands the script the options one word each ("--name" then its value).
 *
 * With --slurm the script runs first in its plan phase (pipelines/lib/flags.bash records its
 * dimoc commands instead of running them, into the work folder .OUT.slurm beside --out);
 * runtime/cluster/slurm.c turns the plan into sbatch jobs, the last of which runs this
 * command again in the finish phase (DIMOC_PIPELINE_PHASE=finish): the script's closing shell
 * work in the work folder, which is then put in place as --out.  `dimoc pipeline
 * --slurm-status OUT` and `--slurm-resubmit OUT` follow such a run and restart what failed. */
#include "args.h"
#include "cli.h"
#include "cluster/slurm.h"
#include "io/formats.h"
#include "io/gradients.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/json.h"
#include "util/outdir.h"
#include "util/paths.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The options every pipeline takes: --data, --mask and --out required, and a gradient table
 * (--bvals and --bvecs, or --grad, or a .mif's own dw_scheme). */
static const dm_opt common_opts[] = {
    {"data", "FILE", NULL,
     "4D diffusion data (NIfTI-1/2, .nii or .nii.gz, or MRtrix .mif/.mif.gz)"},
    {"mask", "FILE", NULL, "3D mask on the data's grid: the voxels to fit"},
    {"bvals", "FILE", NULL, "FSL b-values (one row or column; s/mm^2)"},
    {"bvecs", "FILE", NULL, "FSL gradient directions (3 rows or 3 columns)"},
    {"grad", "FILE", NULL, DM_GRAD_HELP},
    {"out", "DIR", NULL, "output folder: the pipeline writes nothing outside it"},
};
/* The options of a run on SLURM (runtime/cluster/slurm.h), the script never sees them. */
static const dm_opt slurm_opts[] = {
    {"slurm", NULL, NULL, "submit the stages as SLURM jobs (sbatch) instead of running them"},
    {"parts", "N", "1", "with --slurm: split every fit, csd and track into N array jobs"},
    {"partition", "P", NULL, "with --slurm: the partition of every job"},
    {"cpu-partition", "P", NULL,
     "with --slurm: the partition of the jobs that use no GPU (dti, "
     "merges, ...) [default: --partition]"},
    {"time", "T", NULL, "with --slurm: the time limit of every job (sbatch --time)"},
    {"account", "A", NULL, "with --slurm: the account every job is charged to"},
    {"gpus-per-task", "N", NULL, "with --slurm: GPUs of each fit, csd, track and commit job"},
    {"cpus-per-task", "N", NULL, "with --slurm: CPUs of every job (give fits as many --threads)"},
    {"slurm-setup", "FILE", NULL,
     "with --slurm: shell lines every job sources first (module "
     "load ...)"},
    {"dry-run", NULL, NULL, "with --slurm: print the job scripts, submit nothing"},
};
enum { NCOMMON = 6, NSLURM = 10, MAX_OWN = 16 };

typedef struct dm_pipeline_def {
    char *name;
    char *script;
    char *text;    /* the script's leading comment, '#' and one space stripped per line */
    char *summary; /* its first line */
    char *usage;   /* after "usage: " */
    char *own_names[MAX_OWN], *own_args[MAX_OWN], *own_defs[MAX_OWN], *own_help[MAX_OWN];
    int nown;
    int fit_options; /* takes fit options at all */
    char *excluded;  /* " method init-from ... ": fit options it sets itself */
    dm_opt table[DM_MAX_OPTS];
    int nfit; /* fit options in the table, after the common and own ones */
} dm_pipeline_def;
typedef dm_pipeline_def pipeline;

static void pipeline_free(pipeline *p)
{
    free(p->name);
    free(p->script);
    free(p->text);
    free(p->summary);
    free(p->usage);
    for (int i = 0; i < p->nown; i++) {
        free(p->own_names[i]);
        free(p->own_args[i]);
        free(p->own_defs[i]);
        free(p->own_help[i]);
    }
    free(p->excluded);
    memset(p, 0, sizeof *p);
}

static char *trimmed(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    return strndup(s, n);
}

/* The first line of the description, cut after its last whole clause when the sentence goes
 * on past it: "bedpostx with dimoc: ball & sticks ..., the results under" -> up to the ','. */
static char *summary_of(const char *line)
{
    size_t n = strlen(line);
    if (n && line[n - 1] != '.') {
        const char *cut = strrchr(line, ',');
        if (cut && cut > line) n = (size_t)(cut - line);
    }
    return strndup(line, n);
}

/* "  --nfibres N      fibres per voxel [default: 2]" -> one option; -1 when malformed. */
static int parse_own_option(pipeline *p, const char *line)
{
    if (p->nown >= MAX_OWN) return dm_set_error("%s: more than %d options", p->script, MAX_OWN);
    const char *s = line + strspn(line, " ");
    const char *gap = strstr(s, "  ");
    if (strncmp(s, "--", 2) || !gap)
        return dm_set_error("%s: option line '%s' is not '--NAME [ARG]  HELP'", p->script, line);
    char *head = trimmed(s + 2, (size_t)(gap - s - 2));
    char *sp = strchr(head, ' ');
    int k = p->nown++;
    p->own_names[k] = sp ? strndup(head, (size_t)(sp - head)) : strdup(head);
    p->own_args[k] = sp ? trimmed(sp, strlen(sp)) : NULL;
    free(head);
    char *help = trimmed(gap, strlen(gap));
    char *def = strstr(help, " [default: ");
    if (def && help[strlen(help) - 1] == ']') {
        p->own_defs[k] = strndup(def + 11, strlen(def + 11) - 1);
        *def = 0;
    }
    p->own_help[k] = help;
    return 0;
}

/* Reads pipelines/NAME.sh's leading comment into p.  0, or -1 with the error set. */
static int pipeline_load(const char *name, pipeline *p)
{
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    char rel[300];
    snprintf(rel, sizeof rel, "pipelines/%.200s.sh", name);
    p->script = dm_data_path(rel);
    if (!p->script)
        return dm_set_error("pipeline: no pipeline named '%s' (see 'dimoc help pipeline')", name);
    size_t len;
    char *src = dm_read_file(p->script, &len);
    if (!src) return -1;
    size_t cap = len + 1, used = 0;
    p->text = calloc(cap, 1);
    int in_options = 0, rc = 0;
    char *save = NULL;
    for (char *line = strtok_r(src, "\n", &save); line && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "#!", 2)) continue;
        if (line[0] != '#') break; /* the end of the leading comment */
        const char *t = line + 1 + (line[1] == ' ');
        if (in_options && !strncmp(t, "  --", 4)) {
            rc = parse_own_option(p, t);
            continue;
        }
        in_options = 0;
        if (!strcmp(t, "options:")) {
            in_options = 1;
        } else if (!strncmp(t, "usage: ", 7)) {
            free(p->usage);
            p->usage = trimmed(t + 7, strlen(t + 7));
        } else if (!strncmp(t, "fit options:", 12)) {
            const char *v = t + 12 + strspn(t + 12, " ");
            p->fit_options = strcmp(v, "none") != 0;
            const char *but = strstr(v, " but ");
            size_t n = but ? strlen(but) + 2 : 3;
            p->excluded = malloc(n);
            snprintf(p->excluded, n, "%s ", but ? but + 4 : "");
        } else if (*t || (used && p->text[used - 1] != '\n') ||
                   (used > 1 && p->text[used - 2] != '\n')) {
            if (!p->summary && *t) p->summary = summary_of(t);
            used += (size_t)snprintf(p->text + used, cap - used, "%s\n", t);
        }
    }
    free(src);
    if (rc == 0 && (!p->usage || !p->summary || !p->excluded))
        rc = dm_set_error("%s: its leading comment lacks a usage, a summary or a 'fit options:' "
                          "line",
                          p->script);
    return rc;
}

/* Fills p->table: the common options, the pipeline's own, the fit options it passes on. */
static int pipeline_table(pipeline *p)
{
    int n = 0;
    for (int i = 0; i < NCOMMON; i++) p->table[n++] = common_opts[i];
    for (int i = 0; i < p->nown; i++)
        p->table[n++] = (dm_opt){p->own_names[i], p->own_args[i], p->own_defs[i], p->own_help[i]};
    for (int i = 0; i < NSLURM; i++) p->table[n++] = slurm_opts[i];
    const dm_opt *fit = dm_fit_options();
    for (int i = 0; p->fit_options && fit[i].name; i++) {
        char word[140];
        snprintf(word, sizeof word, " --%s ", fit[i].name);
        int taken = 0;
        for (int j = 0; j < n; j++) taken |= !strcmp(p->table[j].name, fit[i].name);
        /* --part: a pipeline splits its fits itself (--slurm --parts N); --then: its cascades
         * are its own */
        if (taken || strstr(p->excluded, word) || !strcmp(fit[i].name, "part") ||
            !strcmp(fit[i].name, "then"))
            continue;
        if (n >= DM_MAX_OPTS - 1) return dm_set_error("%s: too many options", p->script);
        p->table[n++] = fit[i];
        p->nfit++;
    }
    p->table[n] = (dm_opt){NULL, NULL, NULL, NULL};
    return 0;
}

static int valid_name(const char *name);

/* The definition shared with `dimoc bids` (cli.h): load and table, by a checked name. */
dm_pipeline_def *dm_pipeline_def_load(const char *name)
{
    if (!valid_name(name)) {
        dm_set_error("'%s' is not a pipeline name (letters, digits, '_' and '-'; see 'dimoc help "
                     "pipeline')",
                     name);
        return NULL;
    }
    dm_pipeline_def *p = calloc(1, sizeof *p);
    if (!p) {
        dm_set_error("out of memory");
        return NULL;
    }
    if (pipeline_load(name, p) != 0 || pipeline_table(p) != 0) {
        dm_pipeline_def_free(p);
        return NULL;
    }
    return p;
}

void dm_pipeline_def_free(dm_pipeline_def *p)
{
    if (!p) return;
    pipeline_free(p);
    free(p);
}

int dm_pipeline_def_options(const dm_pipeline_def *p, dm_opt *to, int max)
{
    int n = 0;
    for (int i = NCOMMON; p->table[i].name && n < max - 1; i++)
        if (i < NCOMMON + p->nown || i >= NCOMMON + p->nown + NSLURM) to[n++] = p->table[i];
    to[n] = (dm_opt){NULL, NULL, NULL, NULL};
    return n;
}

const struct dm_opt *dm_pipeline_cluster_options(int *n)
{
    *n = NSLURM;
    return slurm_opts;
}

const char *dm_pipeline_def_script(const dm_pipeline_def *p)
{
    return p->script;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Prints the shipped pipelines, one per line with its summary, sorted. */
static void list_pipelines(FILE *out)
{
    char *dir = dm_data_path("pipelines");
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) {
        fprintf(out, "  (no pipelines folder found)\n");
        free(dir);
        return;
    }
    char *names[256];
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && count < 256) {
        size_t n = strlen(e->d_name);
        if (n > 3 && !strcmp(e->d_name + n - 3, ".sh") && e->d_name[0] != '.')
            names[count++] = strndup(e->d_name, n - 3);
    }
    closedir(d);
    free(dir);
    qsort(names, count, sizeof *names, cmp_names);
    for (int i = 0; i < count; i++) {
        pipeline p;
        if (pipeline_load(names[i], &p) == 0)
            fprintf(out, "  %-18s %s\n", names[i], p.summary);
        else
            fprintf(out, "  %-18s (%s)\n", names[i], dm_last_error());
        pipeline_free(&p);
        free(names[i]);
    }
}

int dm_help_pipeline(FILE *out)
{
    fprintf(
        out,
        "usage: dimoc pipeline NAME --data FILE --mask FILE --bvals FILE --bvecs FILE "
        "--out DIR [options]\n\n"
        "Runs the shipped pipeline NAME (pipelines/NAME.sh, a bash script of dimoc commands\n"
        "that you can copy and change).  Every pipeline takes the five inputs above, its\n"
        "own options and options of 'dimoc fit' that it passes on; it checks them all\n"
        "before it starts and writes only under --out.  'dimoc help pipeline NAME' lists\n"
        "them.\n\n"
        "With --slurm the pipeline's stages are submitted as SLURM jobs instead (job\n"
        "arrays of --parts N for every fit, csd and track, a merge job after each, the\n"
        "closing work last; docs/cluster.md).  Following such a run:\n"
        "  dimoc pipeline --slurm-status OUT     one line per stage, each failed part with\n"
        "                                        its log; exit 0 complete, 1 failed, 3 under way\n"
        "  dimoc pipeline --slurm-resubmit OUT   the failed parts again, and every stage after\n"
        "\n"
        "pipelines:\n");
    list_pipelines(out);
    return 0;
}

/* Runs `bash SCRIPT ARGS..` (args, NULL-ended) with the output folder args[at] (the value
 * after --out) replaced by a temporary folder beside it, which is put in place with a
 * provenance.json when the script succeeds, and removed when it fails or is stopped by a
 * signal (util/outdir.h): the output folder is the earlier run's or this one's, never a mix.
 * Returns the exit status. */
static int run_all_or_nothing(const char *name, char **args, int at)
{
    dm_outdir od;
    if (dm_outdir_begin(&od, args[at], DM_OUTDIR_REPLACE) != 0) return dm_report_error();
    char *given = args[at];
    args[at] = od.path;
    dm_provenance prov;
    dm_provenance_begin(&prov, "pipeline");
    dm_provenance_str(&prov, DM_PROV_OPTION, "pipeline", name);
    dm_provenance_str(&prov, DM_PROV_INPUT, "script", args[1]);
    int status = dm_run_child(args, NULL);
    args[at] = given;
    int rc = status < 0 ? -1 : 0;
    /* A failing step has said why in its own one line: the temporary folder goes, quietly. */
    int failed = rc == 0 && status != 0 && !dm_stop_requested();
    if (failed) rc = -1;
    if (rc == 0 && !dm_stop_requested()) {
        dm_provenance_num(&prov, DM_PROV_RESULT, "exit_status", status);
        char *path = dm_path_join(od.path, "provenance.json");
        rc = path ? dm_provenance_write(&prov, path) : dm_set_error("out of memory");
        free(path);
    }
    if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
    if (rc == 0)
        rc = dm_outdir_commit(&od);
    else
        dm_outdir_abort(&od);
    dm_provenance_free(&prov);
    if (rc == 0) return 0;
    if (!failed) dm_report_error();
    return status > 0 ? status : 1;
}

static void print_help(FILE *out, const pipeline *p)
{
    fprintf(out, "usage: %s\n\n%s", p->usage, p->text);
    fprintf(out, "\noptions (--data, --mask and --out are required, and a gradient table: --bvals "
                 "and --bvecs, --grad, or a .mif's dw_scheme):\n");
    for (int i = 0; i < NCOMMON + p->nown; i++) dm_args_help_line(out, &p->table[i]);
    fprintf(out, "\ncluster options (docs/cluster.md):\n");
    for (int i = NCOMMON + p->nown; i < NCOMMON + p->nown + NSLURM; i++)
        dm_args_help_line(out, &p->table[i]);
    if (!p->fit_options) return;
    fprintf(out, "\nfit options, passed on to every 'dimoc fit' (see 'dimoc help fit'):\n");
    for (int i = NCOMMON + p->nown + NSLURM; p->table[i].name; i++)
        dm_args_help_line(out, &p->table[i]);
}

/* A gradient table for the data: FSL's two files together, or --grad, or an MRtrix image (its
 * dw_scheme, checked by the first command that reads it). */
static int check_gradients(const char *cmd, const dm_args *a, const dm_opt *table)
{
    int bvals = dm_arg_given(a, table, "bvals"), bvecs = dm_arg_given(a, table, "bvecs");
    const char *data = dm_arg(a, table, "data");
    if (bvals != bvecs)
        return dm_set_error("%s: --%s given without --%s: --%s is required with --%s (or --grad "
                            "FILE instead of both)",
                            cmd, bvals ? "bvals" : "bvecs", bvals ? "bvecs" : "bvals",
                            bvals ? "bvecs" : "bvals", bvals ? "bvals" : "bvecs");
    if (bvals || dm_arg_given(a, table, "grad") || dm_image_format_of(data) == DM_IMAGE_MIF ||
        dm_image_format_of(data) == DM_IMAGE_MIF_GZ)
        return 0;
    return dm_set_error("%s: no gradient table: give --bvals and --bvecs, or --grad FILE, or an "
                        "MRtrix image with a dw_scheme",
                        data);
}

static int valid_name(const char *name)
{
    return *name &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
               strlen(name);
}

int dm_help_pipeline_named(FILE *out, const char *name)
{
    if (!valid_name(name)) {
        dm_set_error("help pipeline: '%s' is not a pipeline name (see 'dimoc help pipeline')",
                     name);
        return dm_report_error();
    }
    pipeline p;
    int rc = pipeline_load(name, &p);
    if (rc == 0) rc = pipeline_table(&p);
    if (rc == 0) print_help(out, &p);
    pipeline_free(&p);
    return rc == 0 ? 0 : dm_report_error();
}

/* An input file: present, readable, not a folder. */
static int check_input(const char *cmd, const char *opt, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        return dm_set_error("%s: --%s %s: %s", cmd, opt, path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return dm_set_error("%s: --%s %s is a directory, not a file", cmd, opt, path);
    return 0;
}

static int is_slurm_opt(const char *name, size_t len)
{
    for (int i = 0; i < NSLURM; i++)
        if (strlen(slurm_opts[i].name) == len && !strncmp(slurm_opts[i].name, name, len)) return 1;
    return 0;
}

/* The words the script gets: every option as "--name" and, when it takes one, its value,
 * in the order given, but the cluster options; with `absolute`, the four inputs and --out as
 * absolute paths (jobs run elsewhere).  argv was accepted by dm_args_parse with the same
 * table. */
static char **script_words(const pipeline *p, const char *script, int argc, char **argv,
                           int absolute)
{
    char **w = calloc((size_t)2 * argc + 3, sizeof *w);
    int n = 0;
    w[n++] = strdup("bash");
    w[n++] = strdup(script);
    for (int k = 0; k < argc; k++) {
        const char *s = argv[k], *name = s + (s[1] == '-' ? 2 : 1), *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const dm_opt *o = NULL;
        int at = 0;
        for (int i = 0; p->table[i].name && !o; i++)
            if (strlen(p->table[i].name) == len && !strncmp(p->table[i].name, name, len))
                o = &p->table[i], at = i;
        const char *value = o && o->arg ? (eq ? eq + 1 : argv[++k]) : NULL;
        if (is_slurm_opt(name, len)) continue;
        size_t m = len + 3;
        w[n] = malloc(m);
        snprintf(w[n++], m, "--%.*s", (int)len, name);
        if (value) w[n++] = absolute && at < NCOMMON ? dm_slurm_abs_path(value) : strdup(value);
    }
    return w;
}

static void free_words(char **words)
{
    for (char **w = words; *w; w++) free(*w);
    free(words);
}

/* The index of --out's value among the script's words (--out is required: it is there). */
static int out_at(char **words)
{
    int at = 2;
    while (words[at] && strcmp(words[at], "--out")) at++;
    return at + 1;
}

/* The last job of a run on SLURM (DIMOC_PIPELINE_PHASE=finish): the script's closing shell
 * work in the work folder, a provenance.json, and the work folder put in place as --out. */
static int finish_slurm(const char *name, char **args, int at)
{
    char *out = args[at], *work = dm_slurm_work_dir(out);
    struct stat st;
    if (!work) return dm_report_error();
    if (stat(work, &st) != 0 || !S_ISDIR(st.st_mode)) {
        dm_set_error("pipeline %s: the SLURM run's work folder %s is missing", name, work);
        free(work);
        return dm_report_error();
    }
    args[at] = work;
    int status = dm_run_child(args, NULL);
    args[at] = out;
    if (status != 0) {
        free(work);
        return status > 0 ? status : dm_report_error();
    }
    dm_provenance prov;
    dm_provenance_begin(&prov, "pipeline");
    dm_provenance_str(&prov, DM_PROV_OPTION, "pipeline", name);
    dm_provenance_str(&prov, DM_PROV_OPTION, "executor", "slurm");
    dm_provenance_str(&prov, DM_PROV_INPUT, "script", args[1]);
    dm_provenance_num(&prov, DM_PROV_RESULT, "exit_status", 0);
    char *path = dm_path_join(work, "provenance.json");
    int rc = dm_provenance_write(&prov, path);
    free(path);
    dm_provenance_free(&prov);
    /* The work folder takes the place of the empty temporary one, which commit puts in place
     * (replacing an earlier --out whole). */
    dm_outdir od;
    if (rc == 0) rc = dm_outdir_begin(&od, out, DM_OUTDIR_REPLACE);
    if (rc == 0 && (rmdir(od.path) != 0 || rename(work, od.path) != 0)) {
        rc = dm_set_error("pipeline %s: %s -> %s: %s", name, work, od.path, strerror(errno));
        mkdir(od.path, 0755);
        dm_outdir_abort(&od);
    } else if (rc == 0) {
        rc = dm_outdir_commit(&od);
    }
    free(work);
    return rc == 0 ? 0 : dm_report_error();
}

/* dimoc pipeline NAME ... --slurm: the plan, then the jobs (runtime/cluster/slurm.h). */
static int submit_slurm(const pipeline *p, const dm_args *a, char **words, const char *self)
{
    const char *name = p->name;
    int at = out_at(words);
    char *out = words[at], *work = dm_slurm_work_dir(out);
    dm_slurm_opts o = {.partition = dm_arg(a, p->table, "partition"),
                       .time = dm_arg(a, p->table, "time"),
                       .account = dm_arg(a, p->table, "account"),
                       .gpus_per_task = dm_arg(a, p->table, "gpus-per-task"),
                       .cpu_partition = dm_arg(a, p->table, "cpu-partition"),
                       .cpus_per_task = dm_arg(a, p->table, "cpus-per-task"),
                       .parts = 1,
                       .dry_run = dm_arg_given(a, p->table, "dry-run")};
    long parts = 1;
    struct stat st;
    int rc = work ? 0 : -1;
    char *setup = NULL;
    if (rc == 0) rc = dm_arg_long(a, p->table, "parts", 1, 1000, &parts);
    o.parts = (int)parts;
    if (rc == 0 && dm_arg_given(a, p->table, "slurm-setup")) {
        rc = check_input("pipeline --slurm", "slurm-setup", dm_arg(a, p->table, "slurm-setup"));
        o.setup = setup = dm_slurm_abs_path(dm_arg(a, p->table, "slurm-setup"));
    }
    if (rc == 0) rc = dm_outdir_check(out, DM_OUTDIR_REPLACE);
    if (rc == 0 && lstat(work, &st) == 0)
        rc = dm_set_error("pipeline %s --slurm: %s exists: an earlier SLURM run of this --out is "
                          "under way or failed (see 'dimoc pipeline --slurm-status %s'); remove "
                          "it to start again",
                          name, work, out);
    char *slurm_dir = rc == 0 ? dm_path_join(work, "slurm") : NULL;
    char *plan = rc == 0 ? dm_path_join(slurm_dir, "plan.tsv") : NULL;
    if (rc == 0) rc = dm_mkdir_p(slurm_dir);
    if (rc != 0) {
        free(work), free(setup);
        return dm_report_error();
    }
    /* The plan: the script with its dimoc commands recorded, writing under the work folder. */
    setenv("DIMOC_PIPELINE_PHASE", "plan", 1);
    setenv("DIMOC_PLAN", plan, 1);
    words[at] = work;
    int status = dm_run_child(words, NULL);
    words[at] = out;
    unsetenv("DIMOC_PIPELINE_PHASE");
    unsetenv("DIMOC_PLAN");
    if (status != 0) {
        rc = status > 0 ? status : dm_report_error();
    } else {
        /* The last job: this command again, in its finish phase. */
        int nw = 0;
        while (words[nw]) nw++;
        char **fw = calloc((size_t)nw + 2, sizeof *fw);
        fw[0] = (char *)self;
        fw[1] = "pipeline";
        fw[2] = (char *)name;
        for (int i = 2; i < nw; i++) fw[i + 1] = words[i];
        char *finish = dm_shell_quote_argv(nw + 1, fw);
        free(fw);
        rc = dm_slurm_submit(plan, work, out, self, name, finish, &o, stdout);
        free(finish);
        if (rc != 0) rc = dm_report_error();
    }
    if (rc != 0 || o.dry_run) {
        dm_remove_tree(work);
    } else {
        printf("pipeline %s: submitted; 'dimoc pipeline --slurm-status %s' follows the jobs, and "
               "%s appears when the last one ends\n",
               name, out, out);
    }
    free(plan), free(slurm_dir), free(work), free(setup);
    return rc;
}

/* dimoc pipeline --slurm-status|--slurm-resubmit OUT */
static int slurm_command(int argc, char **argv)
{
    if (argc != 2) {
        dm_set_error("pipeline %s: one output folder, the --out of a run with --slurm (see "
                     "'dimoc help pipeline')",
                     argv[0]);
        return dm_report_error();
    }
    if (!strcmp(argv[0], "--slurm-status")) {
        int rc = dm_slurm_status(argv[1], stdout);
        return rc < 0 ? dm_report_error() : rc;
    }
    return dm_slurm_resubmit(argv[1], stdout) == 0 ? 0 : dm_report_error();
}

int dm_cmd_pipeline(int argc, char **argv)
{
    if (argc < 1) {
        dm_help_pipeline(stderr);
        return 2;
    }
    const char *name = argv[0];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) return dm_help_pipeline(stdout);
    if (!strcmp(name, "--slurm-status") || !strcmp(name, "--slurm-resubmit"))
        return slurm_command(argc, argv);
    /* A plain name: no path can lead the lookup out of the pipelines folder. */
    if (!valid_name(name)) {
        dm_set_error("pipeline: '%s' is not a pipeline name (letters, digits, '_' and '-'; see "
                     "'dimoc help pipeline')",
                     name);
        return dm_report_error();
    }
    pipeline p;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "pipeline %.200s", name);
    dm_args a;
    memset(&a, 0, sizeof a);
    int rc = pipeline_load(name, &p);
    if (rc == 0) rc = pipeline_table(&p);
    if (rc == 0 && argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        print_help(stdout, &p);
        pipeline_free(&p);
        return 0;
    }
    if (rc == 0) rc = dm_args_parse(cmd, p.table, NULL, argc - 1, argv + 1, &a);
    if (rc == 0 && a.npositional)
        rc = dm_set_error("%s: unexpected argument '%s'; the inputs are options now: --data, "
                          "--mask, --bvals, --bvecs, --out (see 'dimoc help %s')",
                          cmd, a.positional[0], cmd);
    int slurm = rc == 0 && dm_arg_given(&a, p.table, "slurm");
    for (int i = 1; rc == 0 && !slurm && i < NSLURM; i++)
        if (dm_arg_given(&a, p.table, slurm_opts[i].name))
            rc = dm_set_error("%s: --%s is only valid with --slurm (see 'dimoc help %s')", cmd,
                              slurm_opts[i].name, cmd);
    static const char *const required[] = {"data", "mask", "out"};
    for (int i = 0; rc == 0 && i < 3; i++)
        if (!dm_arg_given(&a, p.table, required[i]))
            rc = dm_set_error("%s: --%s is required (see 'dimoc help %s')", cmd, required[i], cmd);
    for (int i = 0; rc == 0 && i < NCOMMON - 1; i++)
        if (dm_arg_given(&a, p.table, common_opts[i].name))
            rc = check_input(cmd, common_opts[i].name, dm_arg(&a, p.table, common_opts[i].name));
    if (rc == 0) rc = check_gradients(cmd, &a, p.table);
    if (rc != 0) {
        dm_args_free(&a);
        pipeline_free(&p);
        return dm_report_error();
    }

    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        setenv("DIMOC", self, 1);
        setenv("DIMOC_PROGRAM", self, 1);
    }
    const char *phase = getenv("DIMOC_PIPELINE_PHASE");
    int finishing = phase && !strcmp(phase, "finish");
    char **words = script_words(&p, p.script, argc - 1, argv + 1, slurm || finishing);
    if (slurm)
        rc = submit_slurm(&p, &a, words, self);
    else if (finishing)
        rc = finish_slurm(name, words, out_at(words));
    else
        rc = run_all_or_nothing(name, words, out_at(words));
    dm_args_free(&a);
    pipeline_free(&p);
    free_words(words);
    return rc;
}
