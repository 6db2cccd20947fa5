/* Small file-system helpers. */
#ifndef DIMOC_FSUTIL_H
#define DIMOC_FSUTIL_H

#include <stddef.h>
#include <stdio.h>

/* mkdir -p; 0 or -1 with dm_last_error(). */
int dm_mkdir_p(const char *path);
/* Reads a whole file into a NUL-terminated malloc'd buffer; NULL with dm_last_error(). */
char *dm_read_file(const char *path, size_t *len);
/* Writes a buffer to path through a temporary file in the same folder and rename(2). */
int dm_write_file_atomic(const char *path, const void *data, size_t len);
/* Closes f, the temporary file tmp written for path (`failed`: a write to it already went
 * wrong), and renames it into place.  On any failure tmp is removed and the error is "PATH:
 * cannot write: REASON", the reason of the call that failed (a full disk says so).  0 or -1. */
int dm_commit_written(FILE *f, int failed, const char *tmp, const char *path);
/* Temporary sibling name for atomic writes: "<dir>/.<base>.tmp.<pid>.<counter>" (malloc'd). */
char *dm_temp_sibling(const char *path);
/* The same, keeping `ending` (e.g. ".nii.gz") at the end when path has it:
 * "<dir>/.<base-without-ending>.tmp.<pid>.<counter><ending>". */
char *dm_temp_sibling_ext(const char *path, const char *ending);
/* Takes the lock of a cache entry (path + ".lock", flock), waiting while another process or
 * thread holds it: that one is making the same entry, which the caller then finds made
 * instead of making it a second time.  The lock's descriptor (close it to release), or -1
 * when a stop was requested while waiting or no lock can be had (the caller then goes on
 * without one: its entry is written atomically all the same). */
int dm_cache_entry_lock(const char *entry_path);
/* Joins a folder and a file name (malloc'd). */
char *dm_path_join(const char *dir, const char *name);
/* Folder of the running executable (from /proc/self/exe), malloc'd. */
char *dm_exe_dir(void);

#endif
