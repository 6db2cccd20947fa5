/* libFuzzer target over the strict .tck reader and the weights reader (runtime/tractogram/tck.c:
 * dm_tck_read, dm_tck_weights_read), what `dimoc tdi`, `dimoc connectome` and `dimoc commit`
 * read.  The input up to its first NUL byte is a weights file, the rest a .tck; a .tck that reads
 * is checked to hold what its arrays say (every point finite, the starts consistent), and its
 * streamline count is the one the weights are read against.  Built by `make fuzz`; crashing
 * inputs go to tests/fuzz/regressions/tckread/, which tests/unit/test_io.c replays. */
#include "fuzz_io.h"
#include "tractogram/tck.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n1 = nul ? (size_t)(nul - data) : 0;
    static char weights_path[400];
    snprintf(weights_path, sizeof weights_path, "%s", fuzz_file("w.txt", data, n1));
    const char *tck =
        nul ? fuzz_file("t.tck", nul + 1, size - n1 - 1) : fuzz_file("t.tck", data, size);
    dm_tck t;
    long count = 3;
    if (dm_tck_read(tck, &t) == 0) {
        long at = 0;
        for (long i = 0; i < t.count; i++) {
            if (t.start[i] != at || t.npoints[i] < 0) abort();
            at += t.npoints[i];
        }
        if (t.start[t.count] != at) abort();
        for (long k = 0; k < 3 * at; k++)
            if (!isfinite(t.xyz[k])) abort();
        count = t.count;
        dm_tck_free(&t);
    }
    float *w = NULL;
    if (dm_tck_weights_read(weights_path, count, tck, &w) == 0) free(w);
    return 0;
}
