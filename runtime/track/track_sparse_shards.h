/* A sparse count matrix split by row (row r in shard r % n), so that a large buffer of
 * (row << 32 | col) keys, such as a GPU launch returns for a dense connectome, is sorted and
 * merged by every shard at once on the host's cores (OpenMP).  Gathered into one dm_sparse
 * at the end; the result does not depend on the number of shards or threads. */
#ifndef DIMOC_TRACK_SPARSE_SHARDS_H
#define DIMOC_TRACK_SPARSE_SHARDS_H

#include "track/track_sparse.h"

typedef struct dm_sparse_shards {
    int n;
    dm_sparse *shard;
    unsigned long long *scratch; /* keys partitioned by shard, then the sort's scratch */
    size_t cap_scratch;
    int failed;
} dm_sparse_shards;

/* nshards <= 0: one per OpenMP thread. */
int dm_sparse_shards_init(dm_sparse_shards *s, int nshards);
/* The same result as dm_sparse_add_keys; keys equal to ~0 are skipped; keys[] is unchanged. */
void dm_sparse_shards_add_keys(dm_sparse_shards *s, const unsigned long long *keys, size_t n);
/* Adds everything into `into` (compacted), row by row. */
void dm_sparse_shards_gather(const dm_sparse_shards *s, dm_sparse *into);
void dm_sparse_shards_free(dm_sparse_shards *s);

#endif
