/* The reporting of the C unit tests: one "PASS name" or "FAIL name: why" line per check, which
 * tests/run.sh counts.  A test's main returns `failures != 0`. */
#ifndef DIMOC_TEST_CHECK_H
#define DIMOC_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures;

static void check_va(int ok, const char *name, const char *fmt, va_list ap)
{
    if (ok) {
        printf("PASS %s\n", name);
        return;
    }
    failures++;
    printf("FAIL %s: ", name);
    vprintf(fmt, ap);
    printf("\n");
}

/* Reports one check; fmt and what follows say why it failed. */
static void check(int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(int ok, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_va(ok, name, fmt, ap);
    va_end(ap);
}

#endif
