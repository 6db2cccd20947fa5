/* Small file-system helpers: mkdir -p, whole-file reads, atomic writes, paths. */
#define _GNU_SOURCE
#include "util/fsutil.h"
#include "util/error.h"
#include "util/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int dm_mkdir_p(const char *path)
{
    if (!path || !*path) return dm_set_error("cannot create a folder with an empty name");
    char *buf = strdup(path);
    if (!buf) return dm_set_error("out of memory");
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') buf[--len] = '\0';
    /* Create each prefix in turn; an existing folder is fine, an existing file is not. */
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                dm_set_error("cannot create folder %s: %s", buf, strerror(e));
                free(buf);
                return -1;
            }
            *p = saved;
            if (saved == '\0') break;
        }
    }
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
        dm_set_error("cannot create folder %s: a file of that name exists", buf);
        free(buf);
        return -1;
    }
    free(buf);
    return 0;
}

char *dm_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        dm_set_error("cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (!buf) {
        fclose(f);
        dm_set_error("out of memory reading %s", path);
        return NULL;
    }
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(buf);
        dm_set_error("cannot read %s: %s", path, strerror(e));
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static atomic_uint temp_counter;

char *dm_temp_sibling_ext(const char *path, const char *ending)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    size_t baselen = strlen(base);
    size_t endlen = ending ? strlen(ending) : 0;
    if (endlen && baselen >= endlen && strcmp(base + baselen - endlen, ending) == 0)
        baselen -= endlen;
    else
        endlen = 0;
    unsigned n = atomic_fetch_add(&temp_counter, 1);
    size_t size = strlen(path) + 64;
    char *out = malloc(size);
    if (!out) {
        dm_set_error("out of memory");
        return NULL;
    }
    snprintf(out, size, "%.*s.%.*s.tmp.%ld.%u%s", dirlen, path, (int)baselen, base, (long)getpid(),
             n, endlen ? ending : "");
    return out;
}

char *dm_temp_sibling(const char *path)
{
    return dm_temp_sibling_ext(path, NULL);
}

int dm_write_file_atomic(const char *path, const void *data, size_t len)
{
    char *tmp = dm_temp_sibling(path);
    if (!tmp) return -1;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        dm_set_error("cannot write %s: %s", path, strerror(errno));
        free(tmp);
        return -1;
    }
    int ok = fwrite(data, 1, len, f) == len;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        dm_set_error("cannot write %s: %s", path, strerror(e));
    }
    free(tmp);
    return ok ? 0 : -1;
}

int dm_commit_written(FILE *f, int failed, const char *tmp, const char *path)
{
    int e = failed || ferror(f) ? (errno ? errno : EIO) : 0; /* a write's own reason */
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (!e) return 0;
    unlink(tmp);
    return dm_set_error("%s: cannot write: %s", path, strerror(e));
}

char *dm_path_join(const char *dir, const char *name)
{
    if (!dir || !*dir || name[0] == '/') return strdup(name);
    size_t dl = strlen(dir);
    int need_slash = dir[dl - 1] != '/';
    char *out = malloc(dl + need_slash + strlen(name) + 1);
    if (!out) return NULL;
    memcpy(out, dir, dl);
    if (need_slash) out[dl++] = '/';
    strcpy(out + dl, name);
    return out;
}

char *dm_exe_dir(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) {
        dm_set_error("cannot find the running program: %s", strerror(errno));
        return NULL;
    }
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash == buf)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    return strdup(buf);
}

int dm_cache_entry_lock(const char *entry_path)
{
    char *path = NULL;
    if (asprintf(&path, "%s.lock", entry_path) < 0) return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(path);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK || dm_stop_requested()) {
            close(fd);
            return -1;
        }
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return fd;
}
