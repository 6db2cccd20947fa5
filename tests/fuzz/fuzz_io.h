/* Shared by the io fuzz targets: the input bytes as a file that the readers open by name (one
 * per process, removed at exit), for targets built with -fsanitize=fuzzer (`make fuzz`). */
#ifndef DIMOC_FUZZ_IO_H
#define DIMOC_FUZZ_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[256];

static void fuzz_cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
    if (system(cmd) != 0) return;
}

/* fuzz_dir/NAME holding data[0..size); the path in a static buffer. */
static const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[400];
    if (!fuzz_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/dimoc-fuzz.%ld", tmp ? tmp : "/tmp",
                 (long)getpid());
        mkdir(fuzz_dir, 0700);
        atexit(fuzz_cleanup);
    }
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

#endif
