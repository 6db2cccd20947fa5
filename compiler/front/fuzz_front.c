/* libFuzzer target over the front end: lexer, parser, checker and the summary printer.
 * Built by `make fuzz` (clang, ASan, UBSan); crashing inputs go to
 * tests/compiler/fuzz-regressions/, which tests/unit/test_front.c replays. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "compiler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null_stream;
    if (!null_stream) null_stream = fopen("/dev/null", "w");
    /* dm_front_string takes a C string: the input up to its first NUL byte. */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    dm_model *m = dm_front_string("fuzz.model", text, null_stream, NULL, NULL);
    if (m) {
        dm_print_summary(m, null_stream);
        dm_model_free(m);
    }
    free(text);
    return 0;
}
