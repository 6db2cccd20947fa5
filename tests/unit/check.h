/* The reporting of the C unit tests: one "PASS name" or "FAIL name: why" line per check, which
 * tests/run.sh counts. */
#ifndef DIMOC_TEST_CHECK_H
#define DIMOC_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures;

static void check(int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(int ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        printf("PASS %s\n", name);
        return;
    }
    failures++;
    printf("FAIL %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

#endif
