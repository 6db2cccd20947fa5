#include "args.h"
#include "util/error.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int find_opt(const dm_opt *opts, const char *name, size_t len)
{
    for (int i = 0; opts[i].name; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len)) return i;
    return -1;
}

static void set_value(dm_args *a, int i, const char *v)
{
    if (a->value[i]) { /* repeated: join with ',' */
        size_t n = strlen(a->value[i]) + strlen(v) + 2;
        char *s = malloc(n);
        snprintf(s, n, "%s,%s", a->value[i], v);
        free(a->value[i]);
        a->value[i] = s;
    } else {
        a->value[i] = strdup(v);
    }
    a->given[i] = 1;
}

int dm_args_parse(const char *cmd, const dm_opt *opts, int argc, char **argv, dm_args *a)
{
    memset(a, 0, sizeof *a);
    for (int k = 0; k < argc; k++) {
        const char *s = argv[k];
        if (s[0] != '-' || s[1] == 0 || (s[1] >= '0' && s[1] <= '9')) {
            if (a->npositional >= 16) return dm_set_error("%s: too many arguments", cmd);
            a->positional[a->npositional++] = s;
            continue;
        }
        const char *name = s + (s[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int i = find_opt(opts, name, len);
        if (i < 0)
            return dm_set_error("%s: unknown option '%.*s' (see 'dimoc help %s')", cmd,
                                (int)(len + (name - s)), s, cmd);
        if (!opts[i].arg) {
            if (eq) return dm_set_error("%s: option '--%s' takes no value", cmd, opts[i].name);
            a->given[i] = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (k + 1 < argc ? argv[++k] : NULL);
        if (!v)
            return dm_set_error("%s: option '--%s' needs a value (%s)", cmd, opts[i].name,
                                opts[i].arg);
        set_value(a, i, v);
    }
    return 0;
}

static int index_of(const dm_opt *opts, const char *name)
{
    return find_opt(opts, name, strlen(name));
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

int dm_arg_long(const dm_args *a, const dm_opt *opts, const char *name, long lo, long hi, long *out)
{
    const char *v = dm_arg(a, opts, name);
    if (!v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        return dm_set_error("--%s: '%s' is not an integer in [%ld, %ld]", name, v, lo, hi);
    *out = x;
    return 0;
}

int dm_arg_double(const dm_args *a, const dm_opt *opts, const char *name, double *out)
{
    const char *v = dm_arg(a, opts, name);
    if (!v) return 0;
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !isfinite(x))
        return dm_set_error("--%s: '%s' is not a number", name, v);
    *out = x;
    return 0;
}

void dm_args_free(dm_args *a)
{
    for (int i = 0; i < DM_MAX_OPTS; i++) free(a->value[i]);
    memset(a, 0, sizeof *a);
}

void dm_args_help(FILE *out, const char *usage, const char *summary, const dm_opt *opts)
{
    fprintf(out, "usage: %s\n\n%s\n\noptions:\n", usage, summary);
    for (int i = 0; opts[i].name; i++) {
        char head[96];
        snprintf(head, sizeof head, "%s%s%s%s", opts[i].name[1] ? "--" : "-", opts[i].name,
                 opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
        fprintf(out, "  %-28s %s", head, opts[i].help);
        if (opts[i].def) fprintf(out, " [default: %s]", opts[i].def);
        fputc('\n', out);
    }
}
