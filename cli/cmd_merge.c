/* dimoc merge: joins the output folders of a command run in parts (--part K/N). */
#include "args.h"
#include "cli.h"
#include "cluster/merge.h"
#include "util/error.h"

#include <stdio.h>

static const dm_opt merge_opts[] = {
    {"out", "DIR", NULL, "the joined output folder (as one run without --part writes it)"},
    DM_QUIET_OPT,
    {NULL, NULL, NULL, NULL},
};

int dm_help_merge(FILE *out)
{
    dm_args_help(out, "dimoc merge PART_DIR... --out DIR",
                 "Joins the output folders of the N parts of one fit, csd or track run (each\n"
                 "run with --part K/N) into the folder a single run writes: the same bytes in\n"
                 "every file but provenance.json, which lists the parts (their own records go\n"
                 "to DIR/parts/).  Refuses, writing nothing, when a part is missing or did not\n"
                 "finish (a killed part leaves no part.json), or when the folders are parts of\n"
                 "different runs.  (commit's dictionary stage, --stage dictionary --part K/N,\n"
                 "joins so too: its records one part after another.)",
                 merge_opts);
    return 0;
}

int dm_cmd_merge(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("merge", merge_opts, dm_help_merge, argc, argv, &a) != 0)
        return dm_report_error();
    int rc;
    if (a.npositional < 1) {
        rc = dm_set_error("merge: give the part folders to join (see 'dimoc help merge')");
    } else {
        rc = dm_merge_parts(a.positional, a.npositional, dm_arg(&a, merge_opts, "out"),
                            dm_arg_given(&a, merge_opts, "quiet"));
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
