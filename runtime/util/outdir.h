/* All-or-nothing output folders.  A command that writes a folder --out begins a run, which
 * makes the temporary folder ".NAME.tmp.PID" beside it; everything is written there, and
 * commit puts it in place: a missing --out is created by one rename; an --out left by an
 * earlier run is replaced whole (atomically, by exchanging the two folders, then the old one
 * is removed).  abort (an error, a signal) removes the temporary folder, leaving --out as it
 * was.  So --out is always either the earlier run's, complete, or this run's, complete.
 *
 * An existing --out is replaced only when it is empty or holds a provenance.json (every
 * command that writes a folder writes one): a folder of other files is never removed.
 * In merge mode (commands that add a few named files to a folder shared with others: dti
 * --prefix, angles) the files of the run are moved into --out (created when missing) at
 * commit, replacing files of the same names only.
 *
 * Leftovers of runs killed outright (a second Ctrl-C, SIGKILL) are removed by the next run
 * beside them: temporary folders whose process no longer exists. */
#ifndef DIMOC_OUTDIR_H
#define DIMOC_OUTDIR_H

enum { DM_OUTDIR_REPLACE = 0, DM_OUTDIR_MERGE = 1 };

typedef struct dm_outdir {
    char *out;  /* --out as given */
    char *path; /* the temporary folder to write into */
    int mode;
} dm_outdir;

/* Checks that --out may be written in this mode (not a file, not a folder of someone else's
 * files in replace mode); 0 or -1 with dm_last_error().  begin() checks it too: call it alone
 * before long work whose output folder is made only at the end. */
int dm_outdir_check(const char *out, int mode);
/* Makes the temporary folder (and --out's parent folders); 0 or -1 with dm_last_error(). */
int dm_outdir_begin(dm_outdir *o, const char *out, int mode);
/* Puts the temporary folder in place (signals held off meanwhile) and frees o; 0, or -1
 * with dm_last_error() after an abort.  A stop request pending at commit aborts instead. */
int dm_outdir_commit(dm_outdir *o);
/* Removes the temporary folder and frees o (nothing when o was never begun).  After a stop
 * request the error becomes "interrupted by SIG...: OUT left as it was". */
void dm_outdir_abort(dm_outdir *o);

/* Removes a file or a folder and all it holds; 0 or -1 (errors ignored on the way). */
int dm_remove_tree(const char *path);
/* Renames every temporary file tmp[i] (NULL: none) to final[i] with signals held off, so that
 * a signal cannot leave some renamed and others not; after a stop request or a failure the
 * temporaries not yet renamed are removed.  0 or -1 with dm_last_error(). */
int dm_commit_files(char *const tmp[], char *const final[], int n);

#endif
