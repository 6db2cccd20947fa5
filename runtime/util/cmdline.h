/* The program's command line, quoted as a shell would read it back (for provenance). */
#ifndef DIMOC_CMDLINE_H
#define DIMOC_CMDLINE_H

/* argv[0..argc) joined by spaces; an argument that is empty or holds a space, tab, quote,
 * '$', '\\', ';', '&', '|', '<', '>', '*' or '?' is put in single quotes (a quote inside as
 * '\''), so that pasting the line into a shell gives the same arguments.  malloc'd. */
char *dm_shell_quote_argv(int argc, char *const *argv);

/* Records the program's arguments (main() calls it once, before any command runs); argv must
 * outlive every later dm_command_line() call. */
void dm_set_command_line(int argc, char **argv);
/* The recorded command line, quoted by dm_shell_quote_argv (malloc'd; "" when none). */
char *dm_command_line(void);
/* The recorded arguments themselves (argv[0] the program); *argc 0 when none were recorded. */
char **dm_command_argv(int *argc);

#endif
