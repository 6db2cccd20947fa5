/* The table of dimoc's commands: dispatch, `dimoc help [CMD]` and the usage text all read it. */
#ifndef DIMOC_COMMANDS_H
#define DIMOC_COMMANDS_H

#include <stdio.h>

typedef struct dm_command {
    const char *name;
    const char *aliases;  /* other names, space-separated, never listed (NULL: none) */
    const char *group;    /* heading it is listed under in the usage text; NULL: not listed */
    const char *synopsis; /* its usage line there, e.g. "check FILE.model" */
    const char *summary;  /* one line */
    int (*run)(int argc, char **argv); /* argv: the words after the command's name */
    int (*help)(FILE *out);            /* `dimoc help NAME`; NULL: none */
} dm_command;

/* Every command, in the order of the usage text; ends with a row whose name is NULL. */
extern const dm_command dm_commands[];

/* The command called `name` (or one of its aliases); NULL when none is. */
const dm_command *dm_command_find(const char *name);
/* The usage text: the program's line, then the listed commands under their group headings. */
void dm_print_usage(FILE *out);

#endif
