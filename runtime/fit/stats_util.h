/* Summaries of posterior samples: plain, periodic (circular) and axial (dyadic) means. */
#ifndef DIMOC_STATS_UTIL_H
#define DIMOC_STATS_UTIL_H

/* Mean and standard deviation (n-1 denominator; 0 when n < 2) of x[0], x[stride], ... */
void dm_mean_std(const double *x, long n, long stride, double *mean, double *std);

/* Circular mean and standard deviation of a parameter periodic on [lo, hi): values are mapped
 * to angles 2*pi*(x-lo)/(hi-lo); mean = direction of the mean unit vector, wrapped into
 * [lo, hi); std = sqrt(-2 ln R) * (hi-lo)/(2*pi) with R the mean resultant length (so it
 * matches the ordinary std for tightly clustered samples).  std or mean may be NULL. */
void dm_circular_mean_std(const double *x, long n, long stride, double lo, double hi, double *mean,
                          double *std);

/* Mean axis of n unit vectors (sample i at axes[i*stride .. i*stride+2], stride >= 3): the
 * principal eigenvector of the mean dyadic tensor (1/n) sum v v^T, so that v and -v count as
 * the same axis.  dispersion = 1 - largest eigenvalue (0: all samples parallel; as FSL's
 * dyads_dispersion).  Vectors need not be normalised: each is normalised first; zero vectors
 * are skipped.  Returns the number of vectors used (0: axis = (0,0,0), dispersion = 1). */
long dm_dyadic_mean(const double *axes, long n, long stride, double axis[3], double *dispersion);

#endif
