/* Structural connectomes from streamlines and a parcellation, with the defaults of MRtrix's
 * tck2connectome: each endpoint goes to the nearest labelled voxel within 4 mm (its radial
 * search), a streamline counts in the edge of its two endpoints' nodes, and one whose endpoint
 * finds no node counts nowhere.  Also the mean length of the streamlines of each edge
 * (tck2connectome -scale_length -stat_edge mean).  With per-streamline weights (as
 * tck2connectome -tck_weights_in) a streamline counts its weight, and the mean length is
 * weighted: sum(w length) / sum(w).  `dimoc connectome` and the parcellation read from a file
 * are fodtrack_files.h's. */
#ifndef DIMOC_FODTRACK_CONNECTOME_H
#define DIMOC_FODTRACK_CONNECTOME_H

#include "io/space.h"
#include "tractogram/tck.h"
#include "util/json.h"
#include "util/progress.h"

/* Node labels per voxel: 0 is no node, 1..max_label the nodes. */
typedef struct dm_parcellation {
    int nx, ny, nz;
    unsigned int *label; /* nx*ny*nz, x fastest */
    unsigned int max_label;
    dm_affine vox2world, world2vox;
    double spacing[3]; /* voxel sizes, mm */
} dm_parcellation;

/* Takes a 3D image of non-negative integer labels (as MRtrix's check of a node image: a
 * non-integer or negative value, or more than one volume, is an error naming v->name). */
int dm_parcellation_from(const dm_image_view *v, dm_parcellation *p);
void dm_parcellation_free(dm_parcellation *p);

/* tck2connectome's radial search: voxel offsets within radius + half the voxel diagonal
 * (the most an endpoint lies from its voxel's centre), nearest first, ties in z, y, x scan
 * order.  An endpoint takes the label of the labelled voxel whose centre is strictly nearest
 * and closer than radius; the search stops once no remaining offset can be nearer. */
typedef struct dm_node_search {
    int n;
    int (*offset)[3];
    double radius, slack; /* slack: half the voxel diagonal */
} dm_node_search;

int dm_node_search_init(dm_node_search *s, const dm_parcellation *p, double radius_mm);
void dm_node_search_free(dm_node_search *s);
/* The node of an endpoint (world mm); 0 when none is within the radius. */
unsigned int dm_node_of_endpoint(const dm_parcellation *p, const dm_node_search *s,
                                 const float xyz[3]);

/* nodes x nodes matrices (row-major; node k is row k - 1), filled symmetric. */
typedef struct dm_connectome {
    int nodes;          /* the parcellation's largest label */
    double *count;      /* streamlines per edge (with weights: the sum of their weights) */
    double *length_sum; /* the sum of their lengths (mm): sum of segment lengths (each times
                           its streamline's weight) */
    unsigned __int128 *length_fixed; /* unweighted: the sum exactly, each length truncated to a
                                        whole multiple of 2^-64 mm (exact above 2^-12 mm) and
                                        added as an integer, so that the sum does not depend on
                                        the order or grouping of the additions (batches, parts
                                        of a run); length_sum is it times 2^-64.  NULL with
                                        weights (their sums are made in double, in file order) */
    long assigned;                   /* streamlines counted in an edge */
    long unassigned; /* streamlines with an endpoint that found no node (or no points) */
} dm_connectome;

/* Assigns every streamline (threads: 0 = all cores; the sums are made in streamline order,
 * so the result does not depend on the threads).  weight: t->count weights, streamline s
 * counting weight[s] instead of 1; NULL: 1 each.  0, or -1 after a stop request (a signal, or
 * watch's caller; watch NULL: signals only). */
int dm_connectome_build(const dm_parcellation *p, const dm_tck *t, const float *weight,
                        double radius_mm, int threads, dm_watch *watch, dm_connectome *c);
void dm_connectome_free(dm_connectome *c);
/* A connectome as `dimoc connectome` makes it (the command and the C API): the streamlines'
 * ends to the nodes within 4 mm; -1 with an error for a parcellation without labels (named
 * parc_name) or a stop request. */
int dm_connectome_make(const dm_parcellation *p, const char *parc_name, const dm_tck *t,
                       const float *weight, int threads, dm_watch *watch, dm_connectome *c);
/* Its counts in provenance.json's results, as `dimoc connectome` records them. */
void dm_connectome_provenance(const dm_connectome *c, dm_provenance *prov);

/* Writes one matrix as tck2connectome does by default: nodes rows of nodes values separated by
 * ',', upper triangle with the diagonal (0 below), numbers as %.15g.  With `mean`, each entry
 * of `values` is divided by the edge's count (0 where there is none).  To path directly. */
int dm_connectome_write_csv(const dm_connectome *c, const double *values, int mean,
                            const char *path);

/* A length (mm) as a whole multiple of 2^-64 mm, for dm_connectome.length_fixed. */
static inline unsigned __int128 dm_length_fixed(double mm)
{
    return (unsigned __int128)(mm * 0x1p64);
}
/* length_sum from length_fixed (after summing connectomes' counts and length_fixed). */
void dm_connectome_finish(dm_connectome *c);
/* The counts and exact length sums of every entry, for `dimoc merge` (cluster/merge.c's
 * DM_MERGE_MEAN, which writes mean_length.csv from them): a line "nodes N", then N x N lines
 * "count sum" (sum: length_fixed in decimal).  Unweighted connectomes only. */
int dm_connectome_write_sums(const dm_connectome *c, const char *path);

#endif
