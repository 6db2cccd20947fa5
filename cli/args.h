/* Command-line options: one table per command gives the parser its options and
 * `dimoc help CMD` its text, so the two cannot drift apart. */
#ifndef DIMOC_ARGS_H
#define DIMOC_ARGS_H

#include "util/json.h"

#include <stdio.h>

#define DM_MAX_OPTS 64

/* Ends the help text of an option that may be given more than once: the parser reads the
 * mark, so the help and the behaviour agree.  Its values are joined with ','. */
#define DM_REPEATABLE "; repeatable"

/* The option of every command that draws a progress line; dm_arg_quiet applies it. */
#define DM_QUIET_OPT {"quiet", NULL, NULL, "no progress line"}

typedef struct dm_opt {
    const char *name; /* without the leading "--"; a one-letter name is also "-x" */
    const char *arg;  /* placeholder of its value, e.g. "FILE"; NULL for a flag */
    const char *def;  /* default value (NULL: none) */
    const char *help; /* ends in DM_REPEATABLE when the option may be repeated */
} dm_opt;

typedef struct dm_args {
    char *value[DM_MAX_OPTS]; /* malloc'd; a repeatable option's values are joined with ',' */
    int given[DM_MAX_OPTS];
    char **positional; /* the words that are no option, in argv (malloc'd array) */
    int npositional;
    const char *cmd; /* the command, for messages */
} dm_args;

/* Parses argv[0..argc) ("--name value", "--name=value", flags).  Errors, each naming the
 * command's help: an unknown option, a value missing (the next word is another option of the
 * command, or there is none), an option given twice that is not repeatable, a value given to a
 * flag.  A word that starts with '-' and a digit or '.' is a value or positional (-1, -.5).
 * `help` is the command's `dimoc help CMD` (NULL: none): an option word --help or -h that the
 * table does not name prints it, before any work, and ends the program (status 0, or 1 when it
 * failed).  0, or -1 with dm_last_error() and nothing left to free. */
int dm_args_parse(const char *cmd, const dm_opt *opts, int (*help)(FILE *out), int argc,
                  char **argv, dm_args *a);
/* The option of the table named `name` (without "--"), or NULL. */
const dm_opt *dm_opt_find(const dm_opt *opts, const char *name);
/* The value given, else the default, else NULL. */
const char *dm_arg(const dm_args *a, const dm_opt *opts, const char *name);
int dm_arg_given(const dm_args *a, const dm_opt *opts, const char *name);
/* --quiet given: no progress line from this thread's work (util/progress.h). */
void dm_arg_quiet(const dm_args *a, const dm_opt *opts);
/* Integer / number options, checked: -1 with an error naming the option when malformed. */
int dm_arg_long(const dm_args *a, const dm_opt *opts, const char *name, long lo, long hi,
                long *out);
int dm_arg_double(const dm_args *a, const dm_opt *opts, const char *name, double *out);
void dm_args_free(dm_args *a);
void dm_args_help(FILE *out, const char *usage, const char *summary, const dm_opt *opts);
/* Prints one option's line of the help text. */
void dm_args_help_line(FILE *out, const dm_opt *opt);

/* The options in a provenance record: those named in `inputs` (NULL-ended) go to "inputs", the
 * others with a value to "options", positional arguments to "inputs" as argument1, argument2,
 * ...; --out is left out (the file's own place says it). */
void dm_provenance_args(dm_provenance *p, const dm_args *a, const dm_opt *opts,
                        const char *const inputs[]);

#endif
