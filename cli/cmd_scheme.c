/* dimoc scheme: multi-shell gradient schemes for simulations and demos. */
#include "args.h"
#include "cli.h"
#include "util/error.h"
#include "simulate/scheme.h"
#include "io/textio.h"

#include <stdlib.h>

static const dm_opt scheme_opts[] = {
    {"shells", "COUNTxB,..", "5x0,50x1000,50x2000", "shells: directions x b-value (s/mm^2)"},
    {"bvals", "FILE", NULL, "output b-values (one row)"},
    {"bvecs", "FILE", NULL, "output directions (three rows)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_scheme(FILE *out)
{
    dm_args_help(
        out, "dimoc scheme [--shells 5x0,50x1000,50x2000] --bvals FILE --bvecs FILE",
        "Writes an FSL-style scheme; each shell's directions are spread over the sphere by\n"
        "electrostatic repulsion (antipodally symmetric), deterministically.",
        scheme_opts);
    return 0;
}

int dm_cmd_scheme(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("scheme", scheme_opts, dm_help_scheme, argc, argv, &a) != 0)
        return dm_report_error();
    const char *bvals = dm_arg(&a, scheme_opts, "bvals"), *bvecs = dm_arg(&a, scheme_opts, "bvecs");
    int rc;
    if (!bvals || !bvecs) {
        rc = dm_set_error("scheme: --bvals and --bvecs are required");
    } else {
        int n;
        double *b, *g;
        rc = dm_scheme_make(dm_arg(&a, scheme_opts, "shells"), &n, &b, &g);
        if (rc == 0) rc = dm_write_bvals_bvecs(bvals, bvecs, n, b, g);
        if (rc == 0) {
            free(b);
            free(g);
        }
    }
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
