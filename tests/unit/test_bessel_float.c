/* test_bessel.c built in float: the same checks and references in single precision. */
#define TEST_REAL float
#include "test_bessel.c"
