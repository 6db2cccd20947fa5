/* libFuzzer target over the text readers (runtime/io/textio.c): numeric matrices and FSL
 * bvals/bvecs.  The input up to its first NUL byte is the bvals file, the rest the bvecs file;
 * each is also read as a plain matrix.  Built by `make fuzz`; crashing inputs go to
 * tests/fuzz/regressions/text/, which tests/unit/test_io.c replays. */
#include "fuzz_io.h"
#include "io/textio.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n1 = nul ? (size_t)(nul - data) : size;
    const char *bvals = fuzz_file("bvals", data, n1);
    static char bvals_path[400];
    snprintf(bvals_path, sizeof bvals_path, "%s", bvals);
    const char *bvecs = fuzz_file("bvecs", nul ? nul + 1 : data, nul ? size - n1 - 1 : 0);
    int r, c, nread;
    double *m, *b, *g;
    if (dm_read_matrix(bvals_path, &r, &c, &m) == 0) free(m);
    if (dm_read_matrix(bvecs, &r, &c, &m) == 0) free(m);
    if (dm_read_bvals_bvecs(bvals_path, bvecs, 0, &b, &g, &nread) == 0) {
        static char out_vals[420], out_vecs[420];
        snprintf(out_vals, sizeof out_vals, "%s.out", bvals_path);
        snprintf(out_vecs, sizeof out_vecs, "%s.out", bvecs);
        dm_write_bvals_bvecs(out_vals, out_vecs, nread, b, g);
        free(b);
        free(g);
    }
    return 0;
}
