/* A minimal JSON writer for provenance files (strings escaped, numbers as %.17g), and the
 * provenance record that every command other than fit writes (fit writes a fuller one,
 * fit/provenance.c). */
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

/* provenance.json of a command: dimoc's version, when, the full command line, the command,
 * its inputs (paths), options, results (counts) and the seconds it took:
 *   dm_provenance p;  dm_provenance_begin(&p, "dti");
 *   dm_provenance_str(&p, DM_PROV_INPUT, "data", path);  ...
 *   dm_provenance_write(&p, "OUT/provenance.json");  dm_provenance_free(&p); */
enum { DM_PROV_INPUT, DM_PROV_OPTION, DM_PROV_RESULT, DM_PROV_SECTIONS };
#define DM_PROV_MAX 256 /* entries of all sections (track --fod records about 90) */

typedef struct dm_provenance {
    const char *command;
    const char *command_line; /* NULL: the process's (util/cmdline.h); the C API names its call */
    double start; /* monotonic seconds at begin */
    char created[32];
    int n;
    struct {
        int section, is_number;
        char *key, *text;
        double number;
    } item[DM_PROV_MAX];
} dm_provenance;

void dm_provenance_begin(dm_provenance *p, const char *command);
/* Adds "key": "value" to a section (a NULL value is left out). */
void dm_provenance_str(dm_provenance *p, int section, const char *key, const char *value);
void dm_provenance_num(dm_provenance *p, int section, const char *key, double value);
/* Writes the file (through a temporary name and rename); 0 or -1 with dm_last_error(). */
int dm_provenance_write(const dm_provenance *p, const char *path);
/* The same text, for a run in memory (malloc'd; NULL when out of memory). */
char *dm_provenance_text(const dm_provenance *p);
void dm_provenance_free(dm_provenance *p);
/* The provenance file beside a single output file: "dir/sim.nii.gz" -> "dir/sim.provenance.json"
 * (the ending .nii.gz, .nii, .png, .txt or any other after the last dot is dropped); malloc'd. */
char *dm_provenance_sidecar(const char *path);

#endif
