/* The shipped models of a source tree, for the unit tests that go through all of them. */
#ifndef DIMOC_TEST_SHIPPED_MODELS_H
#define DIMOC_TEST_SHIPPED_MODELS_H

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static int shipped_models_by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names (without ".model", malloc'd, in name order) of the ROOT/models folder's .model files, at most max;
 * their count, or -1 when the folder cannot be opened. */
static int shipped_models(const char *root, char **names, int max)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models", root);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t len = strlen(e->d_name);
        if (len > 6 && !strcmp(e->d_name + len - 6, ".model"))
            names[n++] = strndup(e->d_name, len - 6);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, shipped_models_by_name);
    return n;
}

#endif
