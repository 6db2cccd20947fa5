/* dimoc track: being written (see the open issue); replaced by its implementation. */
#include "commands.h"
#include "error.h"

int dm_cmd_track(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    dm_set_error("'track' is not available in this build yet");
    return dm_report_error();
}

int dm_help_track(FILE *out)
{
    fprintf(out, "dimoc track: not available in this build yet\n");
    return 0;
}
