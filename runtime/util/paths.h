/* Where dimoc finds what it ships and where it caches what it compiles. */
#ifndef DIMOC_PATHS_H
#define DIMOC_PATHS_H

/* A file or folder shipped with dimoc, `rel` under the data folder (the one dm_set_data_dir
 * gave, $DIMOC_DATA_DIR, beside libdimoc.so when running inside it, the build tree exe/.., or
 * the install tree exe/../share/dimoc): its path (malloc'd), or NULL. */
char *dm_data_path(const char *rel);
/* Looks for shipped data in DIR before anywhere else (NULL: no such folder); thread-safe. */
void dm_set_data_dir(const char *dir);
/* Path of a shipped model file (malloc'd), or NULL when there is no such model. */
char *dm_shipped_model_path(const char *name);
/* Folder holding the templates (malloc'd), found like the other shipped files. */
char *dm_templates_dir(void);
/* The cache folder of compiled fitters and GPU programs: $XDG_CACHE_HOME/dimoc, else
 * ~/.cache/dimoc (malloc'd), created if needed; NULL with dm_last_error(). */
char *dm_cache_dir(void);

#endif
