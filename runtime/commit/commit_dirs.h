/* The directions of COMMIT's lookup tables: a quasi-uniform set on the hemisphere y >= 0 (a
 * direction and its opposite are one fibre orientation), and a table that takes any unit
 * vector to the nearest of them in constant time.  Our own set, not COMMIT's or AMICO's: n
 * points of a golden-angle spiral with y uniform in (0, 1), so that each covers an equal area. */
#ifndef DIMOC_COMMIT_DIRS_H
#define DIMOC_COMMIT_DIRS_H

typedef struct dm_commit_dirs {
    int n;
    double *dir;           /* n x 3, unit, y >= 0 */
    int nt, np;            /* the table: bins of the polar angle from +y and of the azimuth */
    unsigned short *table; /* nt x np: the nearest direction to each bin's centre */
    /* each bin's upper edge as (cos, sin) of its angle: the fast path of dm_commit_dirs_index */
    double *t_edge, *p_edge; /* nt x 2, np x 2 */
} dm_commit_dirs;

/* n from 1 to 65535; 0 or -1 (out of memory, n out of range) with the error set. */
int dm_commit_dirs_make(int n, dm_commit_dirs *d);
void dm_commit_dirs_free(dm_commit_dirs *d);
/* The index of the direction nearest to the orientation of u (any length > 0, either sign). */
unsigned short dm_commit_dirs_index(const dm_commit_dirs *d, const double u[3]);
/* The same by the definition alone (the two angles by atan2): what dm_commit_dirs_index must
 * return, for the tests. */
unsigned short dm_commit_dirs_index_exact(const dm_commit_dirs *d, const double u[3]);

#endif
