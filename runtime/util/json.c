/* A minimal JSON writer: two-space indentation, one member per line.
 * first[d] holds two flags for nesting depth d: FIRST (no member written yet) and ARRAY
 * (the level is an array, so dm_json_close writes ']'). */
#include "util/json.h"

#include <math.h>

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
