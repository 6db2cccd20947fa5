/* A minimal JSON writer for provenance files (strings escaped, numbers as %.17g). */
#ifndef DIMOC_JSON_H
#define DIMOC_JSON_H

#include <stdio.h>

typedef struct dm_json {
    FILE *f;
    int depth;
    int first[32]; /* no comma needed before the next member at this depth */
} dm_json;

void dm_json_begin(dm_json *j, FILE *f);                          /* writes '{' */
void dm_json_end(dm_json *j);                                     /* writes '}' and a newline */
void dm_json_key_object(dm_json *j, const char *key);             /* "key": { */
void dm_json_key_array(dm_json *j, const char *key);              /* "key": [ */
void dm_json_close(dm_json *j);                                   /* } or ] of the innermost */
void dm_json_str(dm_json *j, const char *key, const char *value); /* key NULL inside arrays */
void dm_json_num(dm_json *j, const char *key, double value);      /* NaN/Inf as null */
void dm_json_int(dm_json *j, const char *key, long long value);
void dm_json_bool(dm_json *j, const char *key, int value);

#endif
