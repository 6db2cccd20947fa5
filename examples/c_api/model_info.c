/* An example of dimoc's C API (include/dimoc.h): describes a model, as `dimoc info` does.
 *
 *   model_info MODEL     MODEL: a shipped model's name or a .model file
 *
 * prints the model's parameters (bounds, start, prior), its per-measurement and per-voxel
 * inputs and its outputs; a model with mistakes gets its diagnostics on stderr, as
 * `dimoc check` prints them, and exit status 1.  Build it against an installed dimoc with the
 * Makefile beside it, or:
 *   cc model_info.c $(pkg-config --cflags --libs dimoc) -o model_info */
#include <dimoc.h>
#include <stdio.h>

static void print_bound(double x)
{
    /* inf and -inf as dimoc writes them */
    if (x > 1e308 || x < -1e308)
        printf("%sinf", x < 0 ? "-" : "");
    else
        printf("%g", x);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: model_info MODEL\n");
        return 2;
    }
    if (dimoc_api_version() / 1000 != DIMOC_API_VERSION_MAJOR) {
        fprintf(stderr, "model_info: built for API %d, the library has %d\n", DIMOC_API_VERSION,
                dimoc_api_version());
        return 1;
    }
    dimoc_model *model = NULL;
    dimoc_status status = dimoc_model_open(argv[1], &model);
    if (status == DIMOC_E_MODEL) {
        /* the handle holds the diagnostics: every mistake with its line and column */
        const dimoc_error *const *diagnostics;
        int n = dimoc_model_diagnostics(model, &diagnostics);
        for (int i = 0; i < n; i++) fputs(diagnostics[i]->text, stderr);
        int errors, warnings;
        dimoc_model_problems(model, &errors, &warnings);
        fprintf(stderr, "%d error%s, %d warning%s\n", errors, errors == 1 ? "" : "s", warnings,
                warnings == 1 ? "" : "s");
        dimoc_model_free(model);
        return 1;
    }
    if (status != DIMOC_OK) {
        const dimoc_error *e = dimoc_last_error();
        fprintf(stderr, "model_info: %s%s%s (%s)\n", e->file ? e->file : "", e->file ? ": " : "",
                e->message, dimoc_status_name(e->code));
        return 1;
    }
    const dimoc_model_description *d = dimoc_model_describe(model);
    if (!d) {
        fprintf(stderr, "model_info: %s\n", dimoc_last_error()->message);
        dimoc_model_free(model);
        return 1;
    }
    printf("model %s: %s\n", d->name, d->description);
    for (int i = 0; i < d->nparameters; i++) {
        const dimoc_parameter *p = d->parameters[i];
        printf("parameter %s %c", p->name, p->lower_closed ? '[' : '(');
        print_bound(p->lower);
        printf(", ");
        print_bound(p->upper);
        printf("%c init ", p->upper_closed ? ']' : ')');
        if (*p->start)
            printf("%s", p->start);
        else
            printf("%g", p->init);
        printf(" prior %s%s\n", p->prior, p->periodic ? " periodic" : "");
    }
    for (int i = 0; i < d->nmeasures; i++)
        printf("measure %s width %d from %s\n", d->measures[i]->name, d->measures[i]->width,
               d->measures[i]->source);
    for (int i = 0; i < d->nvoxel_inputs; i++) {
        const dimoc_input *v = d->voxel_inputs[i];
        printf("voxel %s width %d", v->name, v->width);
        if (v->has_default) printf(" default %g", v->default_value);
        printf("\n");
    }
    for (int i = 0; i < d->noutputs; i++)
        printf("output %s %s width %d\n", d->outputs[i]->name, d->outputs[i]->kind_name,
               d->outputs[i]->width);
    dimoc_model_free(model);
    return 0;
}
