/* The few parallel primitives of the fitting templates.
 *
 * A voxel is fitted by a group of DM_NLANES lanes.  Every lane runs the whole algorithm
 * redundantly (same control flow, same scalar arithmetic, same random numbers); only the loops
 * over measurements are split, lane l taking measurements l, l + DM_NLANES, ..., and their
 * partial sums are combined with dm_lane_sum.  The sum is a butterfly (xor shuffles): at every
 * level lane i adds s_i + s_j and lane j adds s_j + s_i, which IEEE addition makes bit-identical,
 * so all lanes end with the same bits and take the same branches afterwards.
 *
 *   DM_NLANES            lanes per voxel (host: 1; NVRTC: set by the includer, a power of two
 *                        <= 32; the groups are aligned, DM_NLANES consecutive lanes of a warp)
 *   DM_LANE              this lane, 0 .. DM_NLANES-1
 *   dm_lane_sum(v)       sum of v over the group, returned to every lane
 *   dm_lane_broadcast(v, src)   v of lane src, returned to every lane
 *   dm_lane_sync()       barrier of the group
 *   DM_LANE_LEADER       true on the one lane that writes a voxel's results
 *
 * Every lane of a group must call dm_lane_sum / dm_lane_broadcast the same number of times:
 * keep them out of lane-dependent branches.
 *
 * Before including: `real` and DM_FN. */
#ifndef DIMOC_LANES_H
#define DIMOC_LANES_H

#ifdef __CUDACC_RTC__

#ifndef DM_NLANES
#error "lanes.h: define DM_NLANES (1, 2, 4, 8, 16 or 32) before including it"
#endif
#if DM_NLANES < 1 || DM_NLANES > 32 || (DM_NLANES & (DM_NLANES - 1)) != 0
#error "lanes.h: DM_NLANES must be a power of two between 1 and 32"
#endif

#define DM_LANE ((int)(threadIdx.x & (unsigned)(DM_NLANES - 1)))
#define DM_LANE_LEADER (DM_LANE == 0)

/* The member mask of this lane's group within its warp. */
DM_FN unsigned dm_lane_group_mask_(void)
{
#if DM_NLANES == 32
    return 0xffffffffu;
#else
    unsigned first = threadIdx.x & 31u & ~(unsigned)(DM_NLANES - 1);
    return ((1u << DM_NLANES) - 1u) << first;
#endif
}

DM_FN real dm_lane_sum(real v)
{
    unsigned mask = dm_lane_group_mask_();
    for (int offset = DM_NLANES / 2; offset > 0; offset /= 2)
        v += __shfl_xor_sync(mask, v, offset, DM_NLANES);
    return v;
}

DM_FN real dm_lane_broadcast(real v, int src)
{
    return __shfl_sync(dm_lane_group_mask_(), v, src, DM_NLANES);
}

DM_FN void dm_lane_sync(void)
{
    __syncwarp(dm_lane_group_mask_());
}

#else /* host: one lane per voxel */

#undef DM_NLANES
#define DM_NLANES 1
#define DM_LANE 0
#define DM_LANE_LEADER 1

DM_FN real dm_lane_sum(real v)
{
    return v;
}
DM_FN real dm_lane_broadcast(real v, int src)
{
    (void)src;
    return v;
}
DM_FN void dm_lane_sync(void)
{
}

#endif

#endif
