/* libFuzzer target over the .tck writer (runtime/tractogram/tck.c; the readers: fuzz_tckread.c): the input
 * gives the header's extra lines (up to the first NUL byte) and streamlines (a length byte,
 * then that many points of 3 floats), and the file written is checked as MRtrix reads it: the
 * "file: . OFFSET" line, the count, every streamline ended by NaNs, the file by Infs.  Built
 * by `make fuzz`; crashing inputs go to tests/fuzz/regressions/tck/. */
#include "fuzz_io.h"
#include "tractogram/tck.h"
#include "util/fsutil.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t ninfo = nul ? (size_t)(nul - data) : 0;
    char *info = malloc(ninfo + 1);
    memcpy(info, data, ninfo);
    info[ninfo] = 0;
    const char *path = fuzz_file("out.tck", NULL, 0);
    dm_tck_writer *w = dm_tck_open(path, info);
    free(info);
    if (!w) return 0;
    size_t at = nul ? ninfo + 1 : 0;
    long count = 0;
    while (at < size) {
        int n = data[at++];
        size_t bytes = (size_t)n * 3 * sizeof(float);
        if (at + bytes > size) break;
        float *xyz = malloc(bytes ? bytes : 1);
        memcpy(xyz, data + at, bytes);
        at += bytes;
        dm_tck_add(w, xyz, n);
        free(xyz);
        count++;
    }
    if (dm_tck_close(w, (unsigned long long)count) != 0) abort();
    size_t len;
    char *text = dm_read_file(path, &len);
    if (!text) abort();
    const char *file = strstr(text, "\nfile: . ");
    const char *cnt = strstr(text, "\ncount: ");
    if (strncmp(text, "mrtrix tracks\n", 14) || !file || !cnt) abort();
    long offset = strtol(file + 9, NULL, 10), got = strtol(cnt + 8, NULL, 10);
    if (got != count || offset < 0 || (size_t)offset > len || (len - offset) % 12) abort();
    size_t nf = (len - offset) / 4;
    float *f = malloc(nf * 4 + 4); /* the data, aligned (a little-endian host) */
    memcpy(f, text + offset, nf * 4);
    long ends = 0;
    for (size_t i = 0; i + 3 <= nf; i += 3)
        if (isnan(f[i]) && isnan(f[i + 1]) && isnan(f[i + 2])) ends++;
    if (nf < 3 || !isinf(f[nf - 1]) || ends < count) abort();
    free(f);
    free(text);
    return 0;
}
