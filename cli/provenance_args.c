/* A command's options in its provenance record (util/json.h): the files it reads as inputs,
 * every other option that has a value (given or by default) as an option. */
#include "provenance_args.h"

#include <stdio.h>
#include <string.h>

void dm_provenance_args(dm_provenance *p, const dm_args *a, const dm_opt *opts,
                        const char *const inputs[])
{
    for (int i = 0; opts[i].name; i++) {
        const char *v = dm_arg(a, opts, opts[i].name);
        if (!strcmp(opts[i].name, "out")) continue;
        if (!opts[i].arg) { /* a flag */
            if (dm_arg_given(a, opts, opts[i].name))
                dm_provenance_str(p, DM_PROV_OPTION, opts[i].name, "yes");
            continue;
        }
        int input = 0;
        for (int k = 0; inputs && inputs[k]; k++) input |= !strcmp(inputs[k], opts[i].name);
        dm_provenance_str(p, input ? DM_PROV_INPUT : DM_PROV_OPTION, opts[i].name, v);
    }
    for (int k = 0; k < a->npositional; k++) {
        char key[32];
        snprintf(key, sizeof key, "argument%d", k + 1);
        dm_provenance_str(p, DM_PROV_INPUT, key, a->positional[k]);
    }
}
