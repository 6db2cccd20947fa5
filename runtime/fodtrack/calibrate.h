/* The envelope of tckgen's rejection sampling (iFOD1, iFOD2), calibrated once per run as MRtrix's
 * calibrator does: on the sharpest FOD the image can hold (a delta at its lmax), find the
 * smallest set of directions around the current one whose largest value, times a ratio, bounds
 * the value of every proposal in the cone, trading the set's size against the rejections the
 * ratio costs. */
#ifndef DIMOC_FODTRACK_CALIBRATE_H
#define DIMOC_FODTRACK_CALIBRATE_H

typedef struct dm_ft_calibration {
    double *dirs; /* unit vectors around +z, 3 each (+z itself first among them) */
    int n;
    double ratio;
} dm_ft_calibration;

/* iFOD2: arcs of length step (mm) with nsub points over voxels of size vox (mm), fod_power
 * power; iFOD1: single directions (step, vox, nsub unused: ifod2 0).  max_angle in radians.
 * 0, or -1 with an error when no direction has a positive value. */
int dm_ft_calibrate(int ifod2, int lmax, double max_angle, double step, double vox, int nsub,
                    double power, dm_ft_calibration *out);
void dm_ft_calibration_free(dm_ft_calibration *c);

#endif
