/* dimoc check, compile and info: the model designer's commands. */
#include "cli.h"
#include "compiler.h"
#include "util/error.h"
#include "util/paths.h"
#include "util/fsutil.h"
#include "model/model_info.h"
#include "compiler.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dm_cmd_check(int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "usage: dimoc check FILE.model\n");
        return 2;
    }
    int nerr = 0, nwarn = 0;
    dm_model *m = dm_front_file(argv[0], stderr, &nerr, &nwarn);
    if (!m) {
        fprintf(stderr, "%s: %d error%s, %d warning%s\n", argv[0], nerr, nerr == 1 ? "" : "s",
                nwarn, nwarn == 1 ? "" : "s");
        return 1;
    }
    dm_print_summary(m, stdout);
    dm_model_free(m);
    return 0;
}

int dm_cmd_compile(int argc, char **argv)
{
    const char *file = NULL, *dir = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            dir = argv[++i];
        else if (!file && argv[i][0] != '-')
            file = argv[i];
        else {
            fprintf(stderr, "usage: dimoc compile FILE.model [-o DIR]\n");
            return 2;
        }
    }
    if (!file) {
        fprintf(stderr, "usage: dimoc compile FILE.model [-o DIR]\n");
        return 2;
    }
    dm_model *m = dm_front_file(file, stderr, NULL, NULL);
    if (!m) return 1;
    char def[512];
    if (!dir) {
        snprintf(def, sizeof def, "generated/%s", m->name);
        dir = def;
    }
    if (dm_mkdir_p(dir) != 0) {
        dm_model_free(m);
        return dm_report_error();
    }
    int rc = dm_emit_dir(m, dir, stderr);
    if (rc == 0) printf("%s: wrote %s/model.h, model.meta\n", file, dir);
    dm_model_free(m);
    return rc == 0 ? 0 : 1;
}

static void print_number(double x)
{
    if (isinf(x))
        printf("%s", x > 0 ? "inf" : "-inf");
    else
        printf("%g", x);
}

static void list_models(void)
{
    char *probe = dm_shipped_model_path("ball_1_stick");
    printf("shipped models:\n");
    if (!probe) {
        printf("  (none found beside the program)\n");
        return;
    }
    *strrchr(probe, '/') = 0;
    DIR *d = opendir(probe);
    struct dirent *e;
    char *names[128];
    int n = 0;
    while (d && (e = readdir(d)) && n < 128) {
        size_t len = strlen(e->d_name);
        if (len > 6 && !strcmp(e->d_name + len - 6, ".model"))
            names[n++] = strndup(e->d_name, len - 6);
    }
    if (d) closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[i], names[j]) > 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    for (int i = 0; i < n; i++) {
        dm_model_info mi;
        if (dm_model_load(names[i], &mi) == 0) printf("  %-22s %s\n", names[i], mi.description);
        dm_model_info_free(&mi);
        free(names[i]);
    }
    free(probe);
}

int dm_cmd_info(int argc, char **argv)
{
    if (argc == 0) {
        list_models();
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: dimoc info [MODEL]\n");
        return 2;
    }
    dm_model_info mi;
    if (dm_model_load(argv[0], &mi) != 0) return dm_report_error();
    printf("%s: %s\n\n", mi.name, mi.description);
    printf("parameters (%d):\n", mi.nparams);
    printf("  %-10s %-26s %-12s %-18s %s\n", "name", "bounds", "init", "prior", "");
    for (int k = 0; k < mi.nparams; k++) {
        const dm_param_info *x = &mi.params[k];
        printf("  %-10s %c", x->name, x->lo_closed ? '[' : '(');
        print_number(x->lo);
        printf(", ");
        print_number(x->hi);
        printf("%c", x->hi_closed ? ']' : ')');
        printf("%*s", 4, "");
        char rule[24];
        if (x->start != DM_START_CONST)
            printf("%-12s", dm_start_rule_text(x, rule, sizeof rule));
        else
            printf("%-12g", x->init);
        char prior[64];
        if (!strcmp(x->prior, "gaussian") || !strcmp(x->prior, "gamma"))
            snprintf(prior, sizeof prior, "%s(%g, %g)", x->prior, x->prior_a, x->prior_b);
        else if (!strcmp(x->prior, "ard"))
            snprintf(prior, sizeof prior, "ard(%g)", x->prior_a);
        else
            snprintf(prior, sizeof prior, "%s", x->prior);
        printf(" %-18s %s\n", prior, x->periodic ? "periodic" : "");
    }
    printf("\nper-measurement inputs:\n");
    for (int i = 0; i < mi.nmeasures; i++)
        printf("  %-10s width %d, from %s\n", mi.measures[i].name, mi.measures[i].width,
               mi.measures[i].source == DM_SRC_BVALS   ? "--bvals"
               : mi.measures[i].source == DM_SRC_BVECS ? "--bvecs"
                                                       : "--measure NAME=FILE");
    if (mi.nvoxels) printf("\nper-voxel inputs (--voxel NAME=MAP):\n");
    for (int i = 0; i < mi.nvoxels; i++) {
        printf("  %-10s width %d", mi.voxels[i].name, mi.voxels[i].width);
        if (!isnan(mi.voxels[i].default_value)) printf(", default %g", mi.voxels[i].default_value);
        printf("\n");
    }
    printf("\noutputs: one map per parameter");
    for (int i = 0; i < mi.noutputs; i++)
        printf(", %s (%s)", mi.outputs[i].name,
               mi.outputs[i].kind == DM_OUTK_AXIS     ? "axis"
               : mi.outputs[i].kind == DM_OUTK_VECTOR ? "vector"
                                                      : "scalar");
    printf(
        "\n\nwork per measurement: signal %ld operations (%ld transcendental), "
        "signal+gradient %ld (%ld);\nonce per voxel and evaluation: %ld (signal), %ld (gradient)\n",
        mi.flops_signal, mi.flops_signal_transc, mi.flops_gradient, mi.flops_gradient_transc,
        mi.flops_prepare, mi.flops_gradient_prepare);
    dm_model_info_free(&mi);
    return 0;
}
