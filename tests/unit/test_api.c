/* The C API (include/dimoc.h) from inside: a model's diagnostics as records are what the front
 * end prints, record for record (the records' texts joined against dm_front_string's printout,
 * their positions against its header lines); the last error is per thread and left alone by a
 * success; models opened on several threads at once are those opened one at a time;
 * dimoc_set_data_dir puts a folder ahead of the others and NULL takes it back; the refusals of
 * wrong arguments. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler.h"
#include "dimoc.h"
#include "check.h"

/* What dm_front_string prints of TEXT (malloc'd). */
static char *printed(const char *name, const char *text)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    dm_model *m = dm_front_string(name, text, f, NULL, NULL);
    fclose(f);
    if (m) dm_model_free(m);
    return out;
}

static const char *const bad_text = "model twice \"two mistakes and a warning\"\n"
                                    "measure b = bvals\n"
                                    "param S0 in (0, inf) init 1\n"
                                    "param d in (0.01, 0) init 0.001\n"
                                    "param k in (0, 1) init 0.5\n"
                                    "signal S0 * exp(-b * dd)\n";

static void test_records_are_the_printout(void)
{
    dimoc_model *m = NULL;
    dimoc_status rc = dimoc_model_open_source(bad_text, "twice.model", &m);
    const dimoc_error *const *d = NULL;
    int n = dimoc_model_diagnostics(m, &d);
    char *want = printed("twice.model", bad_text);
    size_t len = 0;
    for (int i = 0; i < n; i++) len += strlen(d[i]->text);
    char *joined = calloc(len + 1, 1);
    for (int i = 0; i < n; i++) strcat(joined, d[i]->text);
    check(rc == DIMOC_E_MODEL && m && n >= 2 && !strcmp(joined, want),
          "api-records-joined-are-printout", "rc %d, %d records:\n%s\nprinted:\n%s", rc, n, joined,
          want);
    /* each record's position and message are its header line's */
    int same = n > 0;
    const char *p = want;
    for (int i = 0; i < n && same; i++) {
        char file[64], kind[16];
        int line, col, used = 0;
        same = sscanf(p, "%63[^:]:%d:%d: %15[a-z]: %n", file, &line, &col, kind, &used) == 4 &&
               !strcmp(file, d[i]->file) && line == d[i]->line && col == d[i]->column &&
               !strncmp(p + used, d[i]->message, strlen(d[i]->message)) &&
               (d[i]->severity == DIMOC_SEVERITY_ERROR) == !strcmp(kind, "error");
        p += strlen(d[i]->text);
    }
    check(same, "api-record-fields-are-header-lines", "record and line differ in:\n%s", want);
    int errors = -1, warnings = -1;
    dimoc_model_problems(m, &errors, &warnings);
    int nerr = 0, nwarn = 0;
    FILE *null = fopen("/dev/null", "w");
    dm_front_string("twice.model", bad_text, null, &nerr, &nwarn);
    fclose(null);
    check(errors == nerr && warnings == nwarn && errors == 2, "api-problem-counts",
          "%d errors %d warnings, the front end %d %d", errors, warnings, nerr, nwarn);
    check(dimoc_model_describe(m) == NULL && dimoc_last_error()->code == DIMOC_E_MODEL &&
              dimoc_model_summary(m) == NULL,
          "api-bad-model-not-described", "code %d", dimoc_last_error()->code);
    free(want);
    free(joined);
    dimoc_model_free(m);
}

/* Each thread fails with its own message and must read it back after the others failed. */
static pthread_barrier_t barrier;
static void *fail_own(void *arg)
{
    char name[32];
    snprintf(name, sizeof name, "no_model_%ld", (long)(size_t)arg);
    dimoc_model *m;
    dimoc_model_open(name, &m);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    return (void *)(size_t)(strstr(dimoc_last_error()->message, name) != NULL &&
                            dimoc_last_error()->code == DIMOC_E_NOT_FOUND);
}

static void test_last_error_per_thread(void)
{
    pthread_t t[4];
    pthread_barrier_init(&barrier, NULL, 4);
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, fail_own, (void *)(size_t)i);
    int own = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        own += r != NULL;
    }
    pthread_barrier_destroy(&barrier);
    check(own == 4, "api-last-error-per-thread", "%d of 4 threads read their own", own);
    dimoc_model *m = NULL;
    dimoc_model_open("no_such_model", &m);
    dimoc_status rc = dimoc_model_open("exp_decay", &m);
    check(rc == DIMOC_OK && strstr(dimoc_last_error()->message, "no_such_model"),
          "api-success-leaves-last-error", "rc %d, last error '%s'", rc,
          dimoc_last_error()->message);
    dimoc_model_free(m);
}

/* The shipped models' code hashes and generated code, opened on four threads at once. */
static char **names;
static int nnames;
static char **reference;
static void *open_all(void *arg)
{
    (void)arg;
    long same = 0;
    for (int i = 0; i < nnames; i++) {
        dimoc_model *m = NULL;
        char *h = NULL;
        if (dimoc_model_open(names[i], &m) == DIMOC_OK &&
            dimoc_model_generate(m, &h, NULL) == DIMOC_OK && !strcmp(h, reference[i]))
            same++;
        dimoc_free(h);
        dimoc_model_free(m);
    }
    return (void *)same;
}

static void test_models_on_threads(void)
{
    dimoc_shipped_models(&names, &nnames);
    reference = calloc((size_t)nnames, sizeof *reference);
    for (int i = 0; i < nnames; i++) {
        dimoc_model *m = NULL;
        dimoc_model_open(names[i], &m);
        dimoc_model_generate(m, &reference[i], NULL);
        dimoc_model_free(m);
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, open_all, NULL);
    long same = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        same += (long)r;
    }
    check(nnames > 10 && same == 4L * nnames, "api-models-on-threads", "%ld of %d models the same",
          same, 4 * nnames);
    for (int i = 0; i < nnames; i++) dimoc_free(reference[i]);
    free(reference);
}

static void test_data_dir(void)
{
    char dir[] = "/tmp/dimoc-api-XXXXXX";
    char path[256];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/models", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/models/only_here.model", dir);
    FILE *f = fopen(path, "w");
    fputs("model only_here \"a model in a folder of its own\"\nmeasure b = bvals\n"
          "param S0 in (0, inf) init 1\nsignal S0 * exp(-b)\n",
          f);
    fclose(f);
    dimoc_set_data_dir(dir);
    char **list = NULL;
    int n = 0;
    dimoc_shipped_models(&list, &n);
    char *found = dimoc_data_dir();
    int ok =
        n == 1 && !strcmp(list[0], "only_here") && list[1] == NULL && found && !strcmp(found, dir);
    dimoc_free_list(list);
    dimoc_free(found);
    dimoc_set_data_dir(NULL);
    dimoc_shipped_models(&list, &n);
    check(ok && n == nnames, "api-set-data-dir", "%d models after setting it back, %d before", n,
          nnames);
    dimoc_free_list(list);
    remove(path);
    snprintf(path, sizeof path, "%s/models", dir);
    rmdir(path);
    rmdir(dir);
}

static void test_refusals(void)
{
    dimoc_model *m = (dimoc_model *)1;
    int ok = dimoc_model_open(NULL, &m) == DIMOC_E_ARGUMENT && m == NULL;
    ok = ok && dimoc_model_open("", &m) == DIMOC_E_ARGUMENT;
    ok = ok && dimoc_model_open("ball_1_stick", NULL) == DIMOC_E_ARGUMENT;
    ok = ok && dimoc_model_open_source(NULL, NULL, &m) == DIMOC_E_ARGUMENT;
    ok = ok && dimoc_model_describe(NULL) == NULL && dimoc_last_error()->code == DIMOC_E_ARGUMENT;
    ok = ok && dimoc_set_data_dir("") == DIMOC_E_ARGUMENT;
    dimoc_status rc = dimoc_model_open_file("/no/such/file.model", &m);
    const dimoc_error *e = dimoc_last_error();
    ok = ok && rc == DIMOC_E_IO && m == NULL && !strcmp(e->file, "/no/such/file.model") &&
         !strcmp(e->text, "/no/such/file.model: error: No such file or directory\n");
    ok = ok && !strcmp(dimoc_status_name(DIMOC_E_LIMIT), "DIMOC_E_LIMIT");
    dimoc_context ctx = DIMOC_CONTEXT_INIT;
    ok = ok && ctx.size == sizeof ctx && !ctx.progress && !ctx.cancel;
    ok = ok && dimoc_api_version() == DIMOC_API_VERSION;
    check(ok, "api-refusals", "last error: %s", dimoc_last_error()->message);
}

int main(void)
{
    test_records_are_the_printout();
    test_last_error_per_thread();
    test_models_on_threads();
    test_data_dir();
    test_refusals();
    dimoc_free_list(names);
    return failures != 0;
}
