/* dimoc: the command-line program, a thin layer over the compiler and runtime libraries. */
#include "commands.h"
#include "util/cmdline.h"
#include "util/interrupt.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    /* SIGINT and SIGTERM stop a command cleanly (its temporary outputs removed); the exit
     * status is then the shell's for that signal: 130, 143. */
    dm_interrupt_install();
    dm_set_command_line(argc, argv); /* recorded in provenance.json */
    if (argc < 2) {
        dm_print_usage(stderr);
        return 2;
    }
    const dm_command *c = dm_command_find(argv[1]);
    if (!c) {
        fprintf(stderr, "dimoc: error: unknown command '%s' (see 'dimoc help')\n", argv[1]);
        return 2;
    }
    int rc = c->run(argc - 2, argv + 2);
    int sig = dm_stop_requested() ? dm_stop_requested() : dm_stop_taken();
    return sig ? 128 + sig : rc;
}
