/* Clustering of streamlines as dicelib's run_clustering (metric EDavg, no atlas), which
 * COMMIT's trk2dictionary(blur_clust_thr=...) calls: every streamline resampled to a few points
 * equidistant along its arc length, visited in the file's order, joins the nearest centroid
 * (mean point-wise distance, the better of the two orientations) when that is below the
 * threshold, else founds a new cluster; a centroid is the running mean of its members (flipped
 * to its orientation).  Each cluster's representative is the member nearest its final centroid.
 * The arithmetic is dicelib's, in single precision, so that the clusters are its clusters
 * (docs/commit-facts.md, "blur_clust_thr"). */
#ifndef DIMOC_STREAMLINE_CLUSTER_H
#define DIMOC_STREAMLINE_CLUSTER_H

typedef struct {
    long nclusters;
    long *cluster; /* per input streamline its cluster (-1: an empty streamline) */
    long *rep;     /* per cluster the input index of its representative */
} dm_streamline_clusters;

/* the points of the resampling (dicelib's n_pts, 12 as COMMIT calls it) */
#define DM_STREAMLINE_CLUSTER_POINTS 12

/* Streamline i is points start[i] .. start[i+1]-1 of xyz (3 floats each, mm); thr in mm (> 0).
 * Returns 0, or -1 with the error set (out of memory, more than INT_MAX streamlines). */
int dm_streamline_cluster(const float *xyz, const long *start, long count, double thr, int threads,
                          dm_streamline_clusters *out);
void dm_streamline_clusters_free(dm_streamline_clusters *c);

#endif
