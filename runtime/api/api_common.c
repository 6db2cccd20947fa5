/* The public API's versions, its thread-local last error, the release of what it hands out,
 * and where the shipped data is found (include/dimoc.h). */
#include "api/api_common.h"
#include "model/model_info.h"
#include "util/paths.h"

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
