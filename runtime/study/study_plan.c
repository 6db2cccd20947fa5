/* A pipeline's stages as command lines: its recorded plan read back, or the stages of csd and
 * tractography (see study_plan.h). */
#define _GNU_SOURCE
#include "study/study_plan.h"
#include "csd/dwi.h"
#include "io/formats.h"
#include "io/textio.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing list of words. */
typedef struct words {
    char **w;
    int n, cap;
} words;

static void push(words *ws, char *w)
{
    if (ws->n + 2 > ws->cap) ws->w = realloc(ws->w, (ws->cap = 2 * ws->cap + 16) * sizeof *ws->w);
    ws->w[ws->n++] = w;
    ws->w[ws->n] = NULL;
}

static void push_copy(words *ws, const char *w)
{
    push(ws, strdup(w));
}

static void free_words(char **w)
{
    for (char **p = w; p && *p; p++) free(*p);
    free(w);
}

/* One C escape of $'...' at s (after the backslash): its byte, *s advanced. */
static char c_escape(const char **s)
{
    char c = *(*s)++;
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'v': return '\v';
    case 'e':
    case 'E': return 27;
    case 'x': {
        int v = 0, k = 0;
        while (k < 2 && strchr("0123456789abcdefABCDEF", **s) && **s) {
            char h = *(*s)++;
            v = 16 * v + (h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
            k++;
        }
        return (char)v;
    }
    default:
        if (c >= '0' && c <= '7') {
            int v = c - '0', k = 1;
            while (k < 3 && **s >= '0' && **s <= '7') v = 8 * v + (*(*s)++ - '0'), k++;
            return (char)v;
        }
        return c; /* \\ \' \" and any other: itself */
    }
}

int dm_shell_unquote(const char *line, char ***out)
{
    words ws = {0};
    push(&ws, NULL);
    ws.n = 0; /* an empty list that is already NULL-ended */
    const char *s = line;
    for (;;) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) break;
        size_t cap = strlen(s) + 1, n = 0;
        char *w = malloc(cap);
        while (*s && *s != ' ' && *s != '\t') {
            if (*s == '\\' && s[1]) {
                w[n++] = s[1];
                s += 2;
            } else if (*s == '\'') {
                const char *end = strchr(s + 1, '\'');
                if (!end) goto unterminated;
                memcpy(w + n, s + 1, (size_t)(end - s - 1));
                n += (size_t)(end - s - 1);
                s = end + 1;
            } else if (s[0] == '$' && s[1] == '\'') {
                s += 2;
                while (*s && *s != '\'') {
                    if (*s == '\\' && s[1]) {
                        s++;
                        w[n++] = c_escape(&s);
                    } else {
                        w[n++] = *s++;
                    }
                }
                if (*s != '\'') goto unterminated;
                s++;
            } else {
                w[n++] = *s++;
            }
        }
        w[n] = 0;
        push(&ws, w);
        continue;
    unterminated:
        free(w);
        free_words(ws.w);
        return dm_set_error("an unterminated quote in '%s'", line);
    }
    *out = ws.w;
    return ws.n;
}

static void stage_free(dm_study_stage *s)
{
    free(s->name), free(s->cmd), free(s->out);
    free_words(s->argv);
}

void dm_study_plan_free(dm_study_plan *p)
{
    for (int i = 0; i < p->n; i++) stage_free(&p->stage[i]);
    free(p->stage);
    memset(p, 0, sizeof *p);
}

static dm_study_stage *add_stage(dm_study_plan *p)
{
    p->stage = realloc(p->stage, (size_t)(p->n + 1) * sizeof *p->stage);
    dm_study_stage *s = &p->stage[p->n++];
    memset(s, 0, sizeof *s);
    return s;
}

/* The words of a quoted field appended to ws; -1 on a bad quote. */
static int append_quoted(words *ws, const char *field)
{
    char **w = NULL;
    int n = dm_shell_unquote(field, &w);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) push(ws, w[i]);
    free(w);
    return 0;
}

int dm_study_plan_read(const char *path, dm_study_plan *p)
{
    memset(p, 0, sizeof *p);
    size_t len;
    char *text = dm_read_file(path, &len);
    if (!text) return -1;
    int rc = 0, lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        char *f[6] = {0};
        int nf = 0;
        lineno++;
        for (char *q = line; nf < 6;) {
            f[nf++] = q;
            char *tab = strchr(q, '\t');
            if (!tab) break;
            *tab = 0;
            q = tab + 1;
        }
        words ws = {0};
        if (nf == 6 && !strcmp(f[0], "stage")) {
            dm_study_stage *s = add_stage(p);
            s->name = strdup(f[1]);
            s->cmd = strdup(f[2]);
            char **o = NULL;
            int no = *f[3] ? dm_shell_unquote(f[3], &o) : 0;
            s->out = strdup(no > 0 ? o[0] : "");
            if (no > 0) free_words(o);
            rc = no < 0 ? -1 : append_quoted(&ws, f[4]);
            if (rc == 0 && *s->out) {
                push_copy(&ws, "--out");
                push_copy(&ws, s->out);
            }
            if (rc == 0) rc = append_quoted(&ws, f[5]);
            s->argv = ws.w;
            s->argc = ws.n;
            if (rc == 0 && (s->argc == 0 || strcmp(s->argv[0], s->cmd)))
                rc = dm_set_error("its command '%s' is not its first word", s->cmd);
        } else if (nf == 5 && !strcmp(f[0], "finish")) {
            dm_study_stage *s = add_stage(p);
            s->finish = 1;
            s->name = strdup(f[1]);
            s->depth = atoi(f[2]);
            s->out = strdup("");
            char **sc = NULL;
            int nsc = dm_shell_unquote(f[3], &sc);
            rc = nsc == 1 ? 0 : -1;
            if (rc == 0) s->cmd = strdup(sc[0]);
            free_words(sc);
            if (rc == 0) rc = append_quoted(&ws, f[4]);
            s->argv = ws.w;
            s->argc = ws.n;
        } else {
            rc = -1;
            dm_set_error("not a plan line of pipelines/lib/flags.bash");
        }
        if (rc != 0) dm_set_error("%s: line %d: %s", path, lineno, dm_last_error());
    }
    free(text);
    if (rc != 0) dm_study_plan_free(p);
    return rc;
}

int dm_study_builtin_pipeline(const char *name)
{
    return !strcmp(name, "csd") || !strcmp(name, "tractography");
}

/* The user's option `name` with its value appended to ws when it is among `names`. */
static void route(words *ws, char *const *opts, int nopts, const char *const *names)
{
    for (int i = 0; i + 1 < nopts; i += 2)
        for (int k = 0; names[k]; k++)
            if (!strcmp(opts[i] + 2, names[k])) {
                push_copy(ws, opts[i]);
                push_copy(ws, opts[i + 1]);
            }
}

static dm_study_stage *builtin_stage(dm_study_plan *p, const char *name, words *ws)
{
    dm_study_stage *s = add_stage(p);
    s->name = strdup(name);
    s->cmd = strdup(ws->w[0]);
    s->argv = ws->w;
    s->argc = ws->n;
    for (int i = 0; i + 1 < ws->n; i++)
        if (!strcmp(ws->w[i], "--out")) s->out = strdup(ws->w[i + 1]);
    return s;
}

int dm_study_plan_builtin(const char *pipeline, const dm_study_inputs *in, char *const *opts,
                          int nopts, dm_study_plan *p)
{
    memset(p, 0, sizeof *p);
    if (!dm_study_builtin_pipeline(pipeline))
        return dm_set_error("no built-in pipeline named '%s'", pipeline);
    /* Shells: several diffusion-weighted ones make the deconvolution multi-tissue. */
    double *b = NULL, *g = NULL, shell_b[DM_MAX_SHELLS];
    int nvol = 0, count[DM_MAX_SHELLS];
    if (dm_read_bvals_bvecs(in->bval, in->bvec, 0, &b, &g, &nvol) != 0) return -1;
    int *shell_of = malloc((size_t)nvol * sizeof *shell_of);
    int nshell = dm_shells_group(nvol, b, 80.0, shell_b, count, shell_of);
    int weighted = 0;
    for (int s = 0; s < nshell; s++) weighted += shell_b[s] > DM_BZERO_MAX;
    free(b), free(g), free(shell_of);
    if (nshell < 0) return -1;
    const char *ext = ".nii.gz";
    for (int i = 0; i + 1 < nopts; i += 2)
        if (!strcmp(opts[i], "--format")) {
            dm_image_format f = DM_IMAGE_NII_GZ;
            dm_tracts_format t = DM_TRACTS_TCK;
            if (dm_formats_parse(opts[i + 1], &f, &t) != 0) return -1;
            ext = dm_image_format_ext(f);
        }
    char *stages = dm_path_join(in->out, "dimoc");
    char *resp = dm_path_join(stages, "response"), *csd = dm_path_join(stages, "csd");
    char *track = dm_path_join(stages, "track");
    static const char *const every[] = {"threads", "format", NULL};
    static const char *const csd_opts[] = {"threads", "format", "device", "gpus", "lmax", NULL};
    static const char *const track_opts[] = {"threads", "format", "device", "gpus", "select", NULL};
    words ws = {0};
    const char *common[] = {"--data",  in->dwi,  "--bvals", in->bval,
                            "--bvecs", in->bvec, "--mask",  in->mask};
    push_copy(&ws, "response");
    push_copy(&ws, "--algorithm");
    push_copy(&ws, "dhollander");
    for (int i = 0; i < 8; i++) push_copy(&ws, common[i]);
    push_copy(&ws, "--out");
    push_copy(&ws, resp);
    route(&ws, opts, nopts, every);
    builtin_stage(p, "response", &ws);

    ws = (words){0};
    push_copy(&ws, "csd");
    for (int i = 0; i < 8; i++) push_copy(&ws, common[i]);
    char *responses = NULL;
    if (asprintf(&responses,
                 weighted > 1 ? "%s/wm_response.txt,%s/gm_response.txt,%s/csf_response.txt"
                              : "%s/wm_response.txt",
                 resp, resp, resp) < 0)
        responses = NULL;
    push_copy(&ws, "--response");
    push(&ws, responses);
    push_copy(&ws, "--out");
    push_copy(&ws, csd);
    route(&ws, opts, nopts, csd_opts);
    builtin_stage(p, "csd", &ws);

    if (!strcmp(pipeline, "tractography")) {
        char *fod = NULL;
        if (asprintf(&fod, "%s/wm_fod%s", csd, ext) < 0) fod = NULL;
        ws = (words){0};
        push_copy(&ws, "track");
        push_copy(&ws, "--fod");
        push(&ws, fod);
        push_copy(&ws, "--seed");
        push_copy(&ws, in->mask);
        push_copy(&ws, "--out");
        push_copy(&ws, track);
        route(&ws, opts, nopts, track_opts);
        builtin_stage(p, "track", &ws);
    }
    free(stages), free(resp), free(csd), free(track);
    return 0;
}
