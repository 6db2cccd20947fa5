/* Synthetic gradient schemes for simulation: shells of well-spread directions. */
#ifndef DIMOC_SCHEME_H
#define DIMOC_SCHEME_H

/* spec: comma-separated shells "COUNTxBVAL", e.g. "5x0,50x1000,50x2000" (spaces allowed).
 * Entries follow the order of the spec.  Directions of a shell with b > 0 come from
 * dm_scheme_directions(COUNT); b = 0 entries get direction (0,0,0), as dcm2niix writes them in
 * FSL bvecs (FSL's tools and DIPY's gradient_table accept any direction for b = 0, and
 * dm_read_bvals_bvecs leaves them alone).  On success *n = total count, *b (n values) and
 * *g (n x 3) are malloc'd; returns 0, or -1 with dm_last_error() quoting the spec. */
int dm_scheme_make(const char *spec, int *n, double **b, double **g);

/* n unit vectors (n x 3 into dirs) spread over the sphere as n antipodal pairs: electrostatic
 * repulsion with energy sum 1/|x_i - x_j| + 1/|x_i + x_j|, started from a Fibonacci spiral on
 * the upper hemisphere, a fixed number of steps (deterministic), then flipped to z >= 0. */
void dm_scheme_directions(int n, double *dirs);

#endif
