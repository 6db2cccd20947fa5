/* libFuzzer target over the NIfTI reader (runtime/io/volume.c: niftilib's header, then our
 * own data reading and conversion): the input as a .nii file, or as a .nii.gz when its first
 * byte is odd.  A readable image is written back, through the writer.  Built by `make fuzz`;
 * crashing inputs go to tests/fuzz/regressions/nifti/, which tests/unit/test_io.c replays. */
#include "fuzz_io.h"
#include "io/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int gz = size > 0 && (data[0] & 1);
    const char *path = fuzz_file(gz ? "in.nii.gz" : "in.nii", data, size);
    dm_volume v;
    if (dm_volume_read(path, &v) == 0) {
        double sum = 0;
        for (size_t i = 0; i < DM_NVOX(&v) * (size_t)v.nt; i++) sum += v.data[i];
        if (DM_NVOX(&v) * (size_t)v.nt <= 4096) {
            static char out[400];
            snprintf(out, sizeof out, "%s.out.nii", path);
            dm_volume_write(out, &v, v.nt, v.data, sum > 0 ? DM_OUT_FLOAT32 : DM_OUT_UINT8);
            unlink(out);
        }
        dm_volume_free(&v);
    }
    return 0;
}
