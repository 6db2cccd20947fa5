/* A minimal JSON writer: two-space indentation, one member per line.
 * first[d] holds two flags for nesting depth d: FIRST (no member written yet) and ARRAY
 * (the level is an array, so dm_json_close writes ']'). */
#include "util/json.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef DIMOC_VERSION
#define DIMOC_VERSION "unknown"
#endif

enum { FIRST = 1, ARRAY = 2, MAX_DEPTH = 31 };

static int level(const dm_json *j)
{
    return j->depth < MAX_DEPTH ? j->depth : MAX_DEPTH;
}

static void new_line(dm_json *j)
{
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
}

static void write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f); /* UTF-8 passes through unchanged */
        }
    }
    fputc('"', f);
}

/* Comma, new line and "key": before a member; the key is dropped inside arrays. */
static void member(dm_json *j, const char *key)
{
    int d = level(j);
    if (!(j->first[d] & FIRST)) fputc(',', j->f);
    j->first[d] &= ~FIRST;
    new_line(j);
    if (key && !(j->first[d] & ARRAY)) {
        write_string(j->f, key);
        fputs(": ", j->f);
    }
}

static void open_nested(dm_json *j, const char *key, int array)
{
    member(j, key);
    fputc(array ? '[' : '{', j->f);
    j->depth++;
    j->first[level(j)] = FIRST | (array ? ARRAY : 0);
}

void dm_json_begin(dm_json *j, FILE *f)
{
    j->f = f;
    fputc('{', f);
    j->depth = 1;
    j->first[1] = FIRST;
}

void dm_json_close(dm_json *j)
{
    if (j->depth <= 1) return;
    int d = level(j);
    int was_empty = j->first[d] & FIRST;
    char bracket = (j->first[d] & ARRAY) ? ']' : '}';
    j->depth--;
    if (!was_empty) new_line(j);
    fputc(bracket, j->f);
}

void dm_json_end(dm_json *j)
{
    while (j->depth > 1) dm_json_close(j);
    j->depth = 0;
    fputs("\n}\n", j->f);
}

void dm_json_key_object(dm_json *j, const char *key)
{
    open_nested(j, key, 0);
}
void dm_json_key_array(dm_json *j, const char *key)
{
    open_nested(j, key, 1);
}

void dm_json_str(dm_json *j, const char *key, const char *value)
{
    member(j, key);
    if (value)
        write_string(j->f, value);
    else
        fputs("null", j->f);
}

void dm_json_num(dm_json *j, const char *key, double value)
{
    member(j, key);
    if (isfinite(value))
        fprintf(j->f, "%.17g", value);
    else
        fputs("null", j->f);
}

void dm_json_int(dm_json *j, const char *key, long long value)
{
    member(j, key);
    fprintf(j->f, "%lld", value);
}

void dm_json_bool(dm_json *j, const char *key, int value)
{
    member(j, key);
    fputs(value ? "true" : "false", j->f);
}

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void dm_provenance_begin(dm_provenance *p, const char *command)
{
    memset(p, 0, sizeof *p);
    p->command = command;
    p->start = monotonic_seconds();
    time_t now = time(NULL);
    strftime(p->created, sizeof p->created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

static void add(dm_provenance *p, int section, const char *key, const char *text, double number)
{
    if (p->n >= DM_PROV_MAX || !key) return;
    p->item[p->n].section = section;
    p->item[p->n].key = strdup(key);
    p->item[p->n].text = text ? strdup(text) : NULL;
    p->item[p->n].is_number = !text;
    p->item[p->n].number = number;
    p->n++;
}

void dm_provenance_str(dm_provenance *p, int section, const char *key, const char *value)
{
    if (value) add(p, section, key, value, 0);
}

void dm_provenance_num(dm_provenance *p, int section, const char *key, double value)
{
    add(p, section, key, NULL, value);
}

/* The record as JSON into f. */
static void provenance_json(const dm_provenance *p, FILE *f)
{
    static const char *const names[DM_PROV_SECTIONS] = {"inputs", "options", "results"};
    char *cmdline = p->command_line ? NULL : dm_command_line();
    dm_json j;
    dm_json_begin(&j, f);
    dm_json_str(&j, "dimoc_version", DIMOC_VERSION);
    dm_json_str(&j, "created", p->created);
    dm_json_str(&j, "command", p->command_line ? p->command_line : cmdline ? cmdline : "");
    dm_json_str(&j, "dimoc_command", p->command);
    free(cmdline);
    for (int s = 0; s < DM_PROV_SECTIONS; s++) {
        dm_json_key_object(&j, names[s]);
        for (int i = 0; i < p->n; i++) {
            if (p->item[i].section != s) continue;
            if (p->item[i].is_number)
                dm_json_num(&j, p->item[i].key, p->item[i].number);
            else
                dm_json_str(&j, p->item[i].key, p->item[i].text);
        }
        dm_json_close(&j);
    }
    dm_json_key_object(&j, "timings_seconds");
    dm_json_num(&j, "total", monotonic_seconds() - p->start);
    dm_json_close(&j);
    dm_json_end(&j);
}

int dm_provenance_write(const dm_provenance *p, const char *path)
{
    char *tmp = dm_temp_sibling(path);
    FILE *f = tmp ? fopen(tmp, "w") : NULL;
    if (!f) {
        dm_set_error("cannot write %s: %s", path, tmp ? strerror(errno) : "out of memory");
        free(tmp);
        return -1;
    }
    provenance_json(p, f);
    int rc = dm_commit_written(f, 0, tmp, path);
    free(tmp);
    return rc;
}

char *dm_provenance_text(const dm_provenance *p)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return NULL;
    provenance_json(p, f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void dm_provenance_free(dm_provenance *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->item[i].key);
        free(p->item[i].text);
    }
    p->n = 0;
}

char *dm_provenance_sidecar(const char *path)
{
    size_t n = strlen(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t stem = n;
    if (n > 7 && !strcmp(path + n - 7, ".nii.gz") && path + n - 7 > base) {
        stem = n - 7;
    } else {
        const char *dot = strrchr(base, '.');
        if (dot && dot > base) stem = (size_t)(dot - path);
    }
    char *out = malloc(stem + sizeof ".provenance.json");
    if (!out) return NULL;
    memcpy(out, path, stem);
    strcpy(out + stem, ".provenance.json");
    return out;
}
