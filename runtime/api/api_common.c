/* The public API's versions, its thread-local last error, the release of what it hands out,
 * and where the shipped data is found (include/dimoc.h); what its calls on arrays share (the
 * caller's records and arrays taken, messages in the API's words, warnings kept). */
#include "api/api_common.h"
#include "fit/fit_inputs.h"
#include "model/model_info.h"
#include "util/paths.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DIMOC_VERSION
#define DIMOC_VERSION "unknown"
#endif

/* The last failure of this thread: the record and the text it points at. */
static _Thread_local struct {
    dimoc_error record;
    char message[2048], file[4096], text[6400];
} last;

int dimoc_api_version(void)
{
    return DIMOC_API_VERSION;
}

const char *dimoc_version(void)
{
    return DIMOC_VERSION;
}

const dimoc_error *dimoc_last_error(void)
{
    if (!last.record.message) { /* nothing failed yet on this thread */
        last.record.message = last.message;
        last.record.text = last.text;
    }
    return &last.record;
}

dimoc_status dm_api_fail_record(const dimoc_error *e)
{
    /* The record may point into `last` itself (a caller handing the last error on): copy
     * through scratch buffers. */
    char message[sizeof last.message], file[sizeof last.file], text[sizeof last.text];
    snprintf(message, sizeof message, "%s", e->message ? e->message : "");
    snprintf(file, sizeof file, "%s", e->file ? e->file : "");
    if (e->text)
        snprintf(text, sizeof text, "%s", e->text);
    else
        snprintf(text, sizeof text, "%s\n", message);
    memcpy(last.message, message, sizeof message);
    memcpy(last.file, file, sizeof file);
    memcpy(last.text, text, sizeof text);
    last.record = *e;
    last.record.message = last.message;
    last.record.file = e->file ? last.file : NULL;
    last.record.text = last.text;
    return e->code;
}

dimoc_status dm_api_fail(dimoc_status code, const char *fmt, ...)
{
    char message[sizeof last.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    dimoc_error e = {code, DIMOC_SEVERITY_ERROR, message, NULL, 0, 0, NULL};
    return dm_api_fail_record(&e);
}

dimoc_status dm_api_fail_runtime(dimoc_status code)
{
    return dm_api_fail(code, "%s", dm_last_error());
}

const char *dimoc_status_name(dimoc_status status)
{
    switch (status) {
    case DIMOC_OK: return "DIMOC_OK";
    case DIMOC_E_ARGUMENT: return "DIMOC_E_ARGUMENT";
    case DIMOC_E_NOT_FOUND: return "DIMOC_E_NOT_FOUND";
    case DIMOC_E_IO: return "DIMOC_E_IO";
    case DIMOC_E_MODEL: return "DIMOC_E_MODEL";
    case DIMOC_E_LIMIT: return "DIMOC_E_LIMIT";
    case DIMOC_E_MEMORY: return "DIMOC_E_MEMORY";
    case DIMOC_E_CANCELLED: return "DIMOC_E_CANCELLED";
    case DIMOC_E_INTERNAL: return "DIMOC_E_INTERNAL";
    }
    return "?";
}

void dimoc_free(void *text)
{
    free(text);
}

void dimoc_free_list(char **list)
{
    if (!list) return;
    for (char **p = list; *p; p++) free(*p);
    free(list);
}

dimoc_status dimoc_set_data_dir(const char *dir)
{
    if (dir && !*dir) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_set_data_dir: an empty folder");
    dm_set_data_dir(dir);
    return DIMOC_OK;
}

char *dimoc_data_dir(void)
{
    /* the folder that holds models/: every other shipped folder is beside it */
    char *models = dm_data_path("models");
    if (!models) return NULL;
    char *slash = strrchr(models, '/');
    if (slash) *slash = 0;
    char *real = realpath(models, NULL); /* without the "lib/.." it was found through */
    if (!real) return models;
    free(models);
    return real;
}

dimoc_status dimoc_shipped_models(char ***names, int *count)
{
    if (!names) return dm_api_fail(DIMOC_E_ARGUMENT, "dimoc_shipped_models: names is NULL");
    char **found = NULL;
    int n = dm_shipped_models(&found);
    char **list = malloc(((size_t)n + 1) * sizeof *list);
    if (!list) {
        for (int i = 0; i < n; i++) free(found[i]);
        free(found);
        return dm_api_fail(DIMOC_E_MEMORY, "dimoc_shipped_models: out of memory");
    }
    for (int i = 0; i < n; i++) list[i] = found[i];
    list[n] = NULL;
    free(found);
    *names = list;
    if (count) *count = n;
    return DIMOC_OK;
}

int dm_api_take_record(void *dst, size_t dst_size, const void *src)
{
    size_t size = *(const size_t *)src;
    if (size < sizeof(size_t)) return -1;
    memcpy(dst, src, size < dst_size ? size : dst_size);
    *(size_t *)dst = dst_size;
    return 0;
}

/* The runtime's message in the API's words: the command's options ("--dictionary-penalty")
 * by the names of the options record (dictionary_penalty). */
static void api_words(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = in; *p && n + 1 < size;) {
        int at_word = p == in || p[-1] == ' ' || p[-1] == '\'' || p[-1] == '(';
        if (at_word && p[0] == '-' && p[1] == '-' && islower((unsigned char)p[2])) {
            for (p += 2; (islower((unsigned char)*p) || *p == '-') && n + 1 < size; p++)
                out[n++] = *p == '-' ? '_' : *p;
            continue;
        }
        out[n++] = *p++;
    }
    out[n] = 0;
}

dimoc_status dm_api_fail_words(dimoc_status code)
{
    char message[2048];
    api_words(dm_last_error(), message, sizeof message);
    return dm_api_fail(code, "%s", message);
}

int dm_api_array(const dimoc_array *a, dm_array *out)
{
    memset(out, 0, sizeof *out);
    out->data = a->data;
    out->type = a->dtype == DIMOC_FLOAT32   ? DM_ARRAY_F32
                : a->dtype == DIMOC_FLOAT64 ? DM_ARRAY_F64
                : a->dtype == DIMOC_UINT8   ? DM_ARRAY_U8
                                            : -1;
    out->ndim = a->ndim;
    if (out->type < 0 || a->ndim < 0 || a->ndim > 4) return -1;
    for (int k = 0; k < a->ndim; k++) {
        out->shape[k] = a->shape[k];
        out->stride[k] = a->strides[k];
    }
    return 0;
}

void dm_api_keep_line(void *user, const char *line)
{
    dm_api_lines *l = user;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char **more = realloc(l->line, ((size_t)cap + 1) * sizeof *more);
        if (!more) return;
        l->line = more;
        l->cap = cap;
    }
    char *copy = strdup(line);
    if (copy) {
        l->line[l->n++] = copy;
        l->line[l->n] = NULL;
    }
}

void dm_api_lines_free(dm_api_lines *l)
{
    for (int i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
    memset(l, 0, sizeof *l);
}

dimoc_status dm_api_items(const dimoc_named_array *a, int n, const char *what, dm_fit_items *items)
{
    memset(items, 0, sizeof *items);
    if (n < 0 || (n > 0 && !a)) return dm_api_fail(DIMOC_E_ARGUMENT, "%s: %d given, no array", what, n);
    if (n == 0) return DIMOC_OK;
    if (!(items->item = calloc((size_t)n, sizeof *items->item)))
        return dm_api_fail(DIMOC_E_MEMORY, "%s: out of memory", what);
    items->n = n;
    for (int i = 0; i < n; i++) {
        dm_fit_item *x = &items->item[i];
        if (!a[i].name || !*a[i].name || strlen(a[i].name) >= sizeof x->name)
            return dm_api_fail(DIMOC_E_ARGUMENT, "%s[%d]: no name, or a name too long", what, i);
        snprintf(x->name, sizeof x->name, "%s", a[i].name);
        if (!a[i].array.data || dm_api_array(&a[i].array, &x->map) != 0)
            return dm_api_fail(DIMOC_E_ARGUMENT,
                               "%s %s: no values, or not float32, float64 or uint8 of at most 4 "
                               "dimensions",
                               what, a[i].name);
        if (x->map.ndim == 0)
            snprintf(x->text, sizeof x->text, "%.17g", dm_array_at(&x->map, 0));
        else
            snprintf(x->text, sizeof x->text, "(a map)");
    }
    return DIMOC_OK;
}

dimoc_status dm_api_check_table(const double *bvals, const double *bvecs, int M)
{
    for (int j = 0; j < M; j++) {
        double bj = bvals[j];
        const double *v = bvecs + 3 * (size_t)j;
        if (!isfinite(bj) || bj < 0)
            return dm_api_fail(DIMOC_E_ARGUMENT, "bvals: b-value %d (%g) is not a number >= 0",
                               j + 1, bj);
        double len = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        if (!isfinite(len))
            return dm_api_fail(DIMOC_E_ARGUMENT, "bvecs: direction %d is not finite", j + 1);
        if (bj > 0 && fabs(len - 1) > 0.01 && !(len == 0 && bj <= 50))
            return dm_api_fail(DIMOC_E_ARGUMENT,
                               "bvecs: direction %d has length %.4g at b = %g: a unit direction "
                               "is needed where b > 0",
                               j + 1, len, bj);
    }
    return DIMOC_OK;
}
