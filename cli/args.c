/* Command-line options: the parser over a command's table, checked values, the help text. */
#include "args.h"
#include "io/formats.h"
#include "util/error.h"
#include "util/progress.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int find_opt(const dm_opt *opts, const char *name, size_t len)
{
    for (int i = 0; opts[i].name; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len)) return i;
    return -1;
}

/* "--name", or "-x" for a one-letter name (static buffer: one use per message). */
static const char *shown(const dm_opt *o)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "%s%s", o->name[1] ? "--" : "-", o->name);
    return buf;
}

static int repeatable(const dm_opt *o)
{
    size_t n = strlen(o->help), m = strlen(DM_REPEATABLE);
    return n >= m && !strcmp(o->help + n - m, DM_REPEATABLE);
}

/* 1 when the word is written as an option: '-' then neither a digit nor '.' (-1 and -.5 are
 * values), and not '-' alone. */
static int looks_like_option(const char *s)
{
    return s[0] == '-' && s[1] && !(s[1] >= '0' && s[1] <= '9') && s[1] != '.';
}

/* The option the word names (its "--"/"-" and any "=value" stripped), or -1. */
static int named_option(const dm_opt *opts, const char *s)
{
    if (!looks_like_option(s)) return -1;
    const char *name = s + (s[1] == '-' ? 2 : 1);
    const char *eq = strchr(name, '=');
    return find_opt(opts, name, eq ? (size_t)(eq - name) : strlen(name));
}

static int set_value(dm_args *a, const dm_opt *opts, int i, const char *v)
{
    if (a->given[i] && !repeatable(&opts[i])) {
        if (!opts[i].arg)
            return dm_set_error("%s: %s given twice (see 'dimoc help %s')", a->cmd, shown(&opts[i]),
                                a->cmd);
        return dm_set_error("%s: %s given twice ('%s', then '%s'); it takes one value (see "
                            "'dimoc help %s')",
                            a->cmd, shown(&opts[i]), a->value[i], v, a->cmd);
    }
    a->given[i] = 1;
    if (!v) return 0;
    if (a->value[i]) { /* a repeatable option: join with ',' */
        size_t n = strlen(a->value[i]) + strlen(v) + 2;
        char *s = malloc(n);
        if (!s) return dm_set_error("%s: out of memory", a->cmd);
        snprintf(s, n, "%s,%s", a->value[i], v);
        free(a->value[i]);
        a->value[i] = s;
    } else {
        a->value[i] = strdup(v);
    }
    return 0;
}

static int parse_words(const char *cmd, const dm_opt *opts, int (*help)(FILE *out), int argc,
                       char **argv, dm_args *a)
{
    for (int k = 0; k < argc; k++) {
        const char *s = argv[k];
        if (!looks_like_option(s)) {
            a->positional[a->npositional++] = argv[k];
            continue;
        }
        const char *name = s + (s[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int i = find_opt(opts, name, len);
        if (i < 0 && (!strcmp(s, "--help") || !strcmp(s, "-h")) && help) {
            /* as `dimoc help CMD`, before any work: the options are not read further */
            fflush(stdout);
            exit(help(stdout) == 0 ? 0 : 1);
        }
        if (i < 0)
            return dm_set_error("%s: unknown option '%.*s' (see 'dimoc help %s')", cmd,
                                (int)(len + (name - s)), s, cmd);
        if (!opts[i].arg) {
            if (eq)
                return dm_set_error("%s: %s takes no value (see 'dimoc help %s')", cmd,
                                    shown(&opts[i]), cmd);
            if (set_value(a, opts, i, NULL) != 0) return -1;
            continue;
        }
        /* The next word is the value unless it is another option of this command. */
        const char *v = eq                                                    ? eq + 1
                        : k + 1 < argc && named_option(opts, argv[k + 1]) < 0 ? argv[++k]
                                                                              : NULL;
        if (!v || !*v)
            return dm_set_error("%s: %s needs a value (%s) (see 'dimoc help %s')", cmd,
                                shown(&opts[i]), opts[i].arg, cmd);
        if (set_value(a, opts, i, v) != 0) return -1;
    }
    return 0;
}

/* --format, in every command that has it: the process's output formats, set before any work. */
static int apply_format(const dm_args *a, const dm_opt *opts)
{
    int i = find_opt(opts, "format", 6);
    if (i < 0 || !a->given[i]) return 0;
    dm_image_format image = DM_IMAGE_NII_GZ;
    dm_tracts_format tracts = DM_TRACTS_TCK;
    if (dm_formats_parse(a->value[i], &image, &tracts) != 0)
        return dm_set_error("%s: %s (see 'dimoc help %s')", a->cmd, dm_last_error(), a->cmd);
    dm_formats_set(image, tracts);
    return 0;
}

int dm_args_parse(const char *cmd, const dm_opt *opts, int (*help)(FILE *out), int argc,
                  char **argv, dm_args *a)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->positional = calloc((size_t)argc + 1, sizeof *a->positional);
    if (parse_words(cmd, opts, help, argc, argv, a) == 0 && apply_format(a, opts) == 0) return 0;
    dm_args_free(a); /* the values read before the mistake: the caller has nothing to free */
    return -1;
}

static int index_of(const dm_opt *opts, const char *name)
{
    return find_opt(opts, name, strlen(name));
}

const dm_opt *dm_opt_find(const dm_opt *opts, const char *name)
{
    int i = index_of(opts, name);
    return i < 0 ? NULL : &opts[i];
}

const char *dm_arg(const dm_args *a, const dm_opt *opts, const char *name)
{
    int i = index_of(opts, name);
    if (i < 0) return NULL;
    return a->value[i] ? a->value[i] : opts[i].def;
}

int dm_arg_given(const dm_args *a, const dm_opt *opts, const char *name)
{
    int i = index_of(opts, name);
    return i >= 0 && a->given[i];
}

void dm_arg_quiet(const dm_args *a, const dm_opt *opts)
{
    if (dm_arg_given(a, opts, "quiet")) dm_progress_quiet(1);
}

int dm_arg_long(const dm_args *a, const dm_opt *opts, const char *name, long lo, long hi, long *out)
{
    const char *v = dm_arg(a, opts, name);
    if (!v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        const char *cmd = a->cmd ? a->cmd : "dimoc";
        return dm_set_error("%s: --%s: '%s' is not an integer in [%ld, %ld] (see 'dimoc help %s')",
                            cmd, name, v, lo, hi, cmd);
    }
    *out = x;
    return 0;
}

int dm_arg_double(const dm_args *a, const dm_opt *opts, const char *name, double *out)
{
    const char *v = dm_arg(a, opts, name);
    if (!v) return 0;
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !isfinite(x)) {
        const char *cmd = a->cmd ? a->cmd : "dimoc";
        return dm_set_error("%s: --%s: '%s' is not a number (see 'dimoc help %s')", cmd, name, v,
                            cmd);
    }
    *out = x;
    return 0;
}

void dm_args_free(dm_args *a)
{
    for (int i = 0; i < DM_MAX_OPTS; i++) free(a->value[i]);
    free(a->positional);
    memset(a, 0, sizeof *a);
}

void dm_args_help_line(FILE *out, const dm_opt *o)
{
    char head[96];
    snprintf(head, sizeof head, "%s%s%s%s", o->name[1] ? "--" : "-", o->name, o->arg ? " " : "",
             o->arg ? o->arg : "");
    fprintf(out, "  %-28s %s", head, o->help);
    if (o->def) fprintf(out, " [default: %s]", o->def);
    fputc('\n', out);
}

void dm_args_help(FILE *out, const char *usage, const char *summary, const dm_opt *opts)
{
    fprintf(out, "usage: %s\n\n%s\n", usage, summary);
    if (!opts || !opts[0].name) return;
    fprintf(out, "\noptions:\n");
    for (int i = 0; opts[i].name; i++) dm_args_help_line(out, &opts[i]);
}

/* A command's options in its provenance record: the files it reads as inputs, every other
 * option that has a value (given or by default) as an option. */
void dm_provenance_args(dm_provenance *p, const dm_args *a, const dm_opt *opts,
                        const char *const inputs[])
{
    for (int i = 0; opts[i].name; i++) {
        const char *v = dm_arg(a, opts, opts[i].name);
        if (!strcmp(opts[i].name, "out")) continue;
        if (!opts[i].arg) { /* a flag */
            if (dm_arg_given(a, opts, opts[i].name))
                dm_provenance_str(p, DM_PROV_OPTION, opts[i].name, "yes");
            continue;
        }
        int input = 0;
        for (int k = 0; inputs && inputs[k]; k++) input |= !strcmp(inputs[k], opts[i].name);
        dm_provenance_str(p, input ? DM_PROV_INPUT : DM_PROV_OPTION, opts[i].name, v);
    }
    for (int k = 0; k < a->npositional; k++) {
        char key[32];
        snprintf(key, sizeof key, "argument%d", k + 1);
        dm_provenance_str(p, DM_PROV_INPUT, key, a->positional[k]);
    }
}
