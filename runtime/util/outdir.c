/* All-or-nothing output folders: a temporary folder beside --out, put in place at the end by
 * one atomic exchange (see outdir.h). */
#define _GNU_SOURCE
#include "util/outdir.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

int dm_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return unlink(path);
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return access(path, F_OK) == 0 ? -1 : 0;
}

/* --out split into its folder and its last name ("a/b/fit/" -> "a/b", "fit"); an --out that
 * exists is taken through realpath, so that "." names a real folder.  0 or -1. */
static int split_out(const char *out, char **parent, char **base)
{
    char *full = NULL;
    struct stat st;
    if (stat(out, &st) == 0) full = realpath(out, NULL);
    if (!full) full = strdup(out);
    if (!full) return dm_set_error("out of memory");
    size_t n = strlen(full);
    while (n > 1 && full[n - 1] == '/') full[--n] = '\0';
    char *slash = strrchr(full, '/');
    const char *b = slash ? slash + 1 : full;
    if (!*b || !strcmp(b, ".") || !strcmp(b, "..")) {
        free(full);
        return dm_set_error("--out '%s': give a folder by its name", out);
    }
    *base = strdup(b);
    if (!slash)
        *parent = strdup(".");
    else if (slash == full)
        *parent = strdup("/");
    else
        *parent = strndup(full, (size_t)(slash - full));
    free(full);
    return 0;
}

/* 1 when the folder is empty or holds a provenance.json (or the PREFIXprovenance.json,
 * provenanceSUFFIX.json of merge runs) at its top: a folder that dimoc wrote. */
static int written_by_dimoc(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int entries = 0, ours = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        entries++;
        size_t n = strlen(e->d_name);
        if (strstr(e->d_name, "provenance") && n > 5 && !strcmp(e->d_name + n - 5, ".json"))
            ours = 1;
    }
    closedir(d);
    return entries == 0 || ours;
}

int dm_outdir_check(const char *out, int mode)
{
    if (!out || !*out) return dm_set_error("--out: an empty folder name");
    struct stat st;
    if (stat(out, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode))
        return dm_set_error("--out %s: a file of that name exists (give a folder)", out);
    if (mode == DM_OUTDIR_REPLACE && !written_by_dimoc(out))
        return dm_set_error("--out %s: the folder exists and holds files that dimoc did not "
                            "write (no provenance.json); it would be replaced whole, so give "
                            "a new folder or remove it",
                            out);
    return 0;
}

/* Removes ".BASE.tmp.PID" and ".BASE.old.PID" folders in parent whose process is gone. */
static void sweep_leftovers(const char *parent, const char *base)
{
    DIR *d = opendir(parent);
    if (!d) return;
    size_t bl = strlen(base);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (n[0] != '.' || strncmp(n + 1, base, bl) != 0) continue;
        const char *rest = n + 1 + bl;
        if (strncmp(rest, ".tmp.", 5) != 0 && strncmp(rest, ".old.", 5) != 0) continue;
        char *end;
        long pid = strtol(rest + 5, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *path = dm_path_join(parent, n);
        if (path) dm_remove_tree(path);
        free(path);
    }
    closedir(d);
}

static char *sibling(const char *parent, const char *base, const char *what)
{
    size_t n = strlen(parent) + strlen(base) + 48;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/.%s.%s.%ld", parent, base, what, (long)getpid());
    return s;
}

int dm_outdir_begin(dm_outdir *o, const char *out, int mode)
{
    memset(o, 0, sizeof *o);
    if (dm_outdir_check(out, mode) != 0) return -1;
    char *parent = NULL, *base = NULL;
    if (split_out(out, &parent, &base) != 0) return -1;
    int rc = dm_mkdir_p(parent);
    if (rc == 0) {
        sweep_leftovers(parent, base);
        o->path = sibling(parent, base, "tmp");
        o->out = strdup(out);
        o->mode = mode;
        if (!o->path || !o->out) rc = dm_set_error("out of memory");
    }
    if (rc == 0) {
        dm_remove_tree(o->path); /* a leftover of an earlier process of the same id */
        if (mkdir(o->path, 0777) != 0)
            rc =
                dm_set_error("cannot create the temporary folder %s: %s", o->path, strerror(errno));
    }
    free(parent);
    free(base);
    if (rc != 0) {
        free(o->path);
        free(o->out);
        memset(o, 0, sizeof *o);
    }
    return rc;
}

static void outdir_free(dm_outdir *o)
{
    free(o->path);
    free(o->out);
    memset(o, 0, sizeof *o);
}

void dm_outdir_abort(dm_outdir *o)
{
    if (!o->path) return;
    dm_remove_tree(o->path);
    if (dm_stop_requested()) {
        struct stat st;
        int existed = stat(o->out, &st) == 0;
        dm_stop_error();
        dm_set_error("%s: %s %s", dm_last_error(), o->out,
                     existed ? "left as it was" : "not created");
    }
    outdir_free(o);
}

/* Moves every file of the temporary folder into --out. */
static int merge_into(const dm_outdir *o)
{
    if (dm_mkdir_p(o->out) != 0) return -1;
    DIR *d = opendir(o->path);
    if (!d) return dm_set_error("cannot read %s: %s", o->path, strerror(errno));
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *from = dm_path_join(o->path, e->d_name), *to = dm_path_join(o->out, e->d_name);
        if (!from || !to)
            rc = dm_set_error("out of memory");
        else if (rename(from, to) != 0)
            rc = dm_set_error("cannot move %s into %s: %s", e->d_name, o->out, strerror(errno));
        free(from);
        free(to);
    }
    closedir(d);
    return rc;
}

/* Puts the temporary folder at --out, replacing an earlier run's folder. */
static int replace_out(const dm_outdir *o)
{
    if (rename(o->path, o->out) == 0) return 0; /* no --out yet (or an empty one) */
    if (errno != EEXIST && errno != ENOTEMPTY)
        return dm_set_error("cannot rename %s to %s: %s", o->path, o->out, strerror(errno));
    if (dm_outdir_check(o->out, DM_OUTDIR_REPLACE) != 0) return -1;
    /* Swap the two folders in one step; the old one is then at the temporary name. */
    if (renameat2(AT_FDCWD, o->path, AT_FDCWD, o->out, RENAME_EXCHANGE) == 0) {
        dm_remove_tree(o->path);
        return 0;
    }
    /* A file system without the exchange: the old folder aside, the new one in. */
    char *old = malloc(strlen(o->path) + 8);
    if (!old) return dm_set_error("out of memory");
    strcpy(old, o->path);
    char *tag = NULL;
    for (char *t = strstr(old, ".tmp."); t; t = strstr(t + 1, ".tmp.")) tag = t;
    if (tag) memcpy(tag, ".old.", 5); /* ".BASE.tmp.PID" -> ".BASE.old.PID" */
    int rc = 0;
    dm_remove_tree(old);
    if (rename(o->out, old) != 0) {
        rc = dm_set_error("cannot move the earlier %s aside: %s", o->out, strerror(errno));
    } else if (rename(o->path, o->out) != 0) {
        rc = dm_set_error("cannot rename %s to %s: %s", o->path, o->out, strerror(errno));
        rename(old, o->out);
    } else {
        dm_remove_tree(old);
    }
    free(old);
    return rc;
}

int dm_outdir_commit(dm_outdir *o)
{
    if (!o->path) return dm_set_error("internal error: no output folder begun");
    sigset_t saved;
    dm_interrupt_block(&saved);
    int rc;
    if (dm_stop_requested())
        rc = dm_stop_error();
    else
        rc = o->mode == DM_OUTDIR_MERGE ? merge_into(o) : replace_out(o);
    if (rc == 0) {
        if (o->mode == DM_OUTDIR_MERGE) rmdir(o->path);
        outdir_free(o);
    } else {
        dm_outdir_abort(o);
    }
    dm_interrupt_unblock(&saved);
    return rc;
}

int dm_commit_files(char *const tmp[], char *const final[], int n)
{
    sigset_t saved;
    dm_interrupt_block(&saved);
    int rc = dm_stop_requested() ? dm_stop_error() : 0, done = 0;
    for (; rc == 0 && done < n; done++)
        if (tmp[done] && rename(tmp[done], final[done]) != 0) {
            rc = dm_set_error("cannot write %s: %s", final[done], strerror(errno));
            break;
        }
    for (int k = done; k < n; k++) /* those not renamed */
        if (tmp[k]) unlink(tmp[k]);
    dm_interrupt_unblock(&saved);
    return rc;
}
