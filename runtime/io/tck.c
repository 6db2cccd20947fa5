#include "io/tck.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dm_tck_writer {
    FILE *fp;
    char *path, *tmp;
    long count;
    long count_at; /* byte position of the fixed-width count field */
    int failed;
};

/* Little-endian float32 whatever the host order. */
static void put_f32(FILE *fp, float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    unsigned char b[4] = {u & 255, (u >> 8) & 255, (u >> 16) & 255, u >> 24};
    fwrite(b, 1, 4, fp);
}

dm_tck_writer *dm_tck_open(const char *path, const char *info)
{
    dm_tck_writer *w = calloc(1, sizeof *w);
    w->path = strdup(path);
    w->tmp = dm_temp_sibling(path);
    w->fp = fopen(w->tmp, "wb");
    if (!w->fp) {
        dm_set_error("%s: cannot write", path);
        free(w->path);
        free(w->tmp);
        free(w);
        return NULL;
    }
    /* The header is written with a fixed-width count and an offset computed so that the
     * "file:" line's own length is included.  Of `info`, only "key: value" lines whose key
     * the format does not reserve are kept (a stray "file:" or "END" would mislead readers). */
    size_t cap = 256 + (info ? 2 * strlen(info) : 0);
    char *head = malloc(cap);
    if (!head) {
        fclose(w->fp);
        remove(w->tmp);
        dm_set_error("out of memory");
        free(w->path);
        free(w->tmp);
        free(w);
        return NULL;
    }
    size_t len = (size_t)snprintf(head, cap, "mrtrix tracks\ndatatype: Float32LE\n");
    for (const char *line = info; line && *line;) {
        size_t n = strcspn(line, "\n");
        const char *colon = memchr(line, ':', n);
        static const char *const reserved[] = {"file", "count", "total_count", "datatype", NULL};
        int keep = colon && colon > line && !memchr(line, '\r', n) && !memchr(line, 0, n);
        for (int k = 0; keep && reserved[k]; k++)
            keep = !((size_t)(colon - line) == strlen(reserved[k]) &&
                     !strncmp(line, reserved[k], strlen(reserved[k])));
        if (keep) {
            memcpy(head + len, line, n);
            len += n;
            head[len++] = '\n';
        }
        line += n + (line[n] == '\n');
    }
    long count_at = (long)len + (long)strlen("count: ");
    len += (size_t)snprintf(head + len, cap - len, "count: %012ld\ntotal_count: %012ld\n", 0L, 0L);
    long offset = (long)len + 32; /* "file: . NNN\nEND\n" fits in 32 bytes with padding */
    len += (size_t)snprintf(head + len, cap - len, "file: . %ld\nEND\n", offset);
    fwrite(head, 1, len, w->fp);
    free(head);
    for (long i = (long)len; i < offset; i++) fputc(' ', w->fp); /* padding before the data */
    w->count_at = count_at;
    return w;
}

void dm_tck_add(dm_tck_writer *w, const float *xyz, int n)
{
    for (int i = 0; i < 3 * n; i++) put_f32(w->fp, xyz[i]);
    for (int a = 0; a < 3; a++) put_f32(w->fp, NAN);
    w->count++;
}

int dm_tck_close(dm_tck_writer *w, unsigned long long total_count)
{
    for (int a = 0; a < 3; a++) put_f32(w->fp, INFINITY);
    char num[64];
    snprintf(num, sizeof num, "%012ld\ntotal_count: %012llu", w->count, total_count);
    int bad = fseek(w->fp, w->count_at, SEEK_SET) != 0 ||
              fwrite(num, 1, strlen(num), w->fp) != strlen(num);
    bad |= ferror(w->fp) | (fclose(w->fp) != 0);
    int rc = 0;
    if (bad || rename(w->tmp, w->path) != 0) {
        remove(w->tmp);
        rc = dm_set_error("%s: cannot write", w->path);
    }
    free(w->path);
    free(w->tmp);
    free(w);
    return rc;
}

void dm_tck_abort(dm_tck_writer *w)
{
    if (!w) return;
    fclose(w->fp);
    remove(w->tmp);
    free(w->path);
    free(w->tmp);
    free(w);
}
