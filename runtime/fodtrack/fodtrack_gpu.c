#include "fodtrack/fodtrack_gpu.h"
#include "util/error.h"
dm_ft_gpu *dm_ft_gpu_open(const dm_ft_plan *p, int use_double, const char *gpus, long mb)
{
    (void)p; (void)use_double; (void)gpus; (void)mb;
    dm_set_error("track --fod: GPU not yet");
    return NULL;
}
long dm_ft_gpu_max_batch(const dm_ft_gpu *g) { (void)g; return 0; }
long dm_ft_gpu_threads(const dm_ft_gpu *g) { (void)g; return 0; }
int dm_ft_gpu_batch(dm_ft_gpu *g, unsigned long long first, long n, dm_ft_batch *b) { (void)g; (void)first; (void)n; (void)b; return -1; }
const char *dm_ft_gpu_device(const dm_ft_gpu *g) { (void)g; return ""; }
const dm_ft_gpu_times *dm_ft_gpu_timing(const dm_ft_gpu *g) { (void)g; return 0; }
void dm_ft_gpu_close(dm_ft_gpu *g) { (void)g; }
