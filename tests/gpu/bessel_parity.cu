/* J0, J1, J1' and the roots of templates/maths/mathlib.h on the GPU against the host: the same bits
 * when neither side fuses multiply-adds (nvcc -fmad=false; the host compiler
 * -ffp-contract=off), in the precision of -DREAL (float or double).  Run by
 * tests/gpu/test_bessel_parity.sh. */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

typedef REAL real;
#define DM_FN static __host__ __device__ inline
#include "maths/mathlib.h"

__global__ void eval(const real *x, real *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[3 * i] = dm_bessel_j0(x[i]);
    out[3 * i + 1] = dm_bessel_j1(x[i]);
    out[3 * i + 2] = dm_bessel_j1_deriv(x[i]);
}

__global__ void roots(real *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[2 * i] = dm_bessel_j1p_root(i + 1);
    out[2 * i + 1] = dm_bessel_sj1p_root(i + 1);
}

int main(void)
{
    const int n = 400000, nr = 1000;
    real *x = (real *)malloc(sizeof(real) * n), *host = (real *)malloc(sizeof(real) * 3 * n);
    real *dev_out = (real *)malloc(sizeof(real) * 3 * n);
    unsigned long long s = 12345;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        double range = i % 4 == 0 ? 2 : i % 4 == 1 ? 30 : i % 4 == 2 ? 120 : 5000;
        x[i] = (real)((2 * u - 1) * range);
    }
    for (int i = 0; i < n; i++) {
        host[3 * i] = dm_bessel_j0(x[i]);
        host[3 * i + 1] = dm_bessel_j1(x[i]);
        host[3 * i + 2] = dm_bessel_j1_deriv(x[i]);
    }
    real *dx, *dout;
    cudaMalloc(&dx, sizeof(real) * n);
    cudaMalloc(&dout, sizeof(real) * 3 * n);
    cudaMemcpy(dx, x, sizeof(real) * n, cudaMemcpyHostToDevice);
    eval<<<(n + 255) / 256, 256>>>(dx, dout, n);
    cudaMemcpy(dev_out, dout, sizeof(real) * 3 * n, cudaMemcpyDeviceToHost);
    int differ = 0, first = -1;
    for (int i = 0; i < 3 * n; i++)
        if (memcmp(&host[i], &dev_out[i], sizeof(real)) != 0) {
            differ++;
            if (first < 0) first = i;
        }
    const char *p = sizeof(real) == 4 ? "float" : "double";
    if (differ)
        printf("FAIL %s-bessel-gpu-bits: %d of %d values differ (first x = %.17g: %.17g vs %.17g)\n",
               p, differ, 3 * n, (double)x[first / 3], (double)host[first],
               (double)dev_out[first]);
    else
        printf("PASS %s-bessel-gpu-bits (%d values of J0, J1, J1' at |x| <= 5000)\n", p, 3 * n);
    real hr[2 * nr], gr[2 * nr];
    for (int i = 0; i < nr; i++) {
        hr[2 * i] = dm_bessel_j1p_root(i + 1);
        hr[2 * i + 1] = dm_bessel_sj1p_root(i + 1);
    }
    real *droots;
    cudaMalloc(&droots, sizeof(real) * 2 * nr);
    roots<<<(nr + 127) / 128, 128>>>(droots, nr);
    cudaMemcpy(gr, droots, sizeof(real) * 2 * nr, cudaMemcpyDeviceToHost);
    cudaError_t err = cudaGetLastError();
    int rdiff = memcmp(hr, gr, sizeof hr) != 0;
    printf("%s %s-bessel-roots-gpu-bits%s\n", rdiff || err ? "FAIL" : "PASS", p,
           err ? cudaGetErrorString(err) : "");
    return differ || rdiff || err;
}
