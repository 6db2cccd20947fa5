/* Shell quoting of an argument vector, and the program's own command line. */
#include "util/cmdline.h"

#include <stdlib.h>
#include <string.h>

static int g_argc;
static char **g_argv;

char *dm_shell_quote_argv(int argc, char *const *argv)
{
    /* Worst case: every character a quote, written as 4 bytes; then two quotes and a space. */
    size_t n = 1;
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) * 4 + 3;
    char *s = malloc(n), *o = s;
    if (!s) return NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int quote = strpbrk(a, " \t\"'$\\;&|<>*?") != NULL || !*a;
        if (i) *o++ = ' ';
        if (quote) *o++ = '\'';
        for (; *a; a++) {
            if (*a == '\'' && quote) {
                memcpy(o, "'\\''", 4);
                o += 4;
            } else {
                *o++ = *a;
            }
        }
        if (quote) *o++ = '\'';
    }
    *o = 0;
    return s;
}

void dm_set_command_line(int argc, char **argv)
{
    g_argc = argc;
    g_argv = argv;
}

char *dm_command_line(void)
{
    return dm_shell_quote_argv(g_argc, g_argv);
}

char **dm_command_argv(int *argc)
{
    *argc = g_argc;
    return g_argv;
}
