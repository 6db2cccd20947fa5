#include "commit/commit_operator.h"

#include "io/bigalloc.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A segment while the voxel order is made: its preconditioned length (carried, so that the voxel
 * order's lengths are not gathered by q), streamline, direction and streamline-order place q
 * (q_lo + 2^32 q_hi: 16 bytes in all). */
typedef struct {
    float len;
    unsigned str, q_lo;
    unsigned short dir, q_hi;
} seg_key;

static double peak_norm(const float *p)
{
    return sqrt((double)p[0] * p[0] + (double)p[1] * p[1] + (double)p[2] * p[2]);
}

/* Voxel v's peaks p (npeaks) kept for the EC compartment: norm > 0 and at least vf_thr times
 * the largest.  Returns how many; with dirs, each one's voxel and direction listed in order. */
static long ec_peaks(const float *p, int npeaks, double vf_thr, const dm_commit_dirs *dirs,
                     unsigned *vox, long v, unsigned short *dir)
{
    double top = 0;
    for (int i = 0; i < npeaks; i++) top = fmax(top, peak_norm(p + 3 * i));
    long n = 0;
    for (int i = 0; i < npeaks; i++) {
        double nrm = peak_norm(p + 3 * i);
        if (!(nrm > 0 && nrm >= vf_thr * top)) continue;
        if (dirs) {
            double u[3] = {p[3 * i], p[3 * i + 1], p[3 * i + 2]};
            vox[n] = (unsigned)v;
            dir[n] = dm_commit_dirs_index(dirs, u);
        }
        n++;
    }
    return n;
}

/* The segments by voxel, in streamline order within each voxel (a stable counting sort): vs
 * (nv + 1, zeroed) their starts, key the segments.  Counted and placed by up to MAX_SHARES
 * threads, each over a range of streamlines whose segments follow the ranges before it in
 * every voxel: the order of one thread.  0, or -1 out of memory. */
#define MAX_SHARES 16
static int by_voxel(const dm_commit_dict *d, const float *str_len, int threads, long *vs,
                    seg_key *key)
{
    const long nv = d->nvox, nf = d->nkept, nseg = d->nseg;
    const int shares = threads < MAX_SHARES ? threads : MAX_SHARES;
    long *cnt = calloc((size_t)shares * (nv ? nv : 1), sizeof *cnt), cut[MAX_SHARES + 1];
    if (!cnt) return -1;
    long f = 0;
    cut[0] = 0; /* streamline ranges of about equal segments */
    for (int t = 1; t <= shares; t++) {
        const long want = nseg / shares * t + (t == shares ? nseg % shares : 0);
        while (f < nf && d->str_start[f] < want) f++;
        cut[t] = t == shares ? nf : f;
    }
#pragma omp parallel for schedule(static, 1) num_threads(shares)
    for (int t = 0; t < shares; t++) {
        long *c = cnt + (size_t)t * nv;
        for (long q = d->str_start[cut[t]]; q < d->str_start[cut[t + 1]]; q++) c[d->seg_vox[q]]++;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long v = 0; v < nv; v++) { /* each share's first place in the voxel, from 0 */
        long n = 0;
        for (int t = 0; t < shares; t++) {
            const long c = cnt[(size_t)t * nv + v];
            cnt[(size_t)t * nv + v] = n;
            n += c;
        }
        vs[v + 1] = n;
    }
    for (long v = 0; v < nv; v++) vs[v + 1] += vs[v];
#pragma omp parallel for schedule(static, 1) num_threads(shares)
    for (int t = 0; t < shares; t++) {
        long *c = cnt + (size_t)t * nv;
        for (long g = cut[t]; g < cut[t + 1]; g++)
            for (long q = d->str_start[g]; q < d->str_start[g + 1]; q++) {
                const unsigned v = d->seg_vox[q];
                key[vs[v] + c[v]++] = (seg_key){str_len[q], (unsigned)g, (unsigned)q, d->seg_dir[q],
                                                (unsigned short)(q >> 32)};
            }
    }
    free(cnt);
    return 0;
}

int dm_commit_operator_build(const dm_commit_dict *d, const dm_commit_kernels *k,
                             const dm_commit_dirs *dirs, const float *peaks, int npeaks,
                             double vf_thr, int threads, dm_commit_operator *A)
{
    memset(A, 0, sizeof *A);
    A->threads = threads > 0 ? threads : 1;
    const long nv = d->nvox, nf = d->nkept, nseg = d->nseg;
    long *vs = calloc((size_t)nv + 1, sizeof *vs); /* segments by voxel: [vs[v], vs[v + 1]) */
    A->run_start = calloc((size_t)nv + 1, sizeof *A->run_start);
    A->seg_str = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *A->seg_str);
    A->seg_len = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *A->seg_len);
    A->str_len = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *A->str_len);
    A->str_run = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *A->str_run);
    A->ec_start = calloc((size_t)nv + 1, sizeof *A->ec_start);
    if (!vs || !A->run_start || !A->seg_str || !A->seg_len || !A->str_len || !A->str_run ||
        !A->ec_start)
        goto oom;
    /* the norm of each kept streamline, by column */
    float *col_norm = malloc((size_t)(nf ? nf : 1) * sizeof *col_norm);
    if (!col_norm) goto oom;
    for (long s = 0; s < d->nstr; s++)
        if (d->column[s] >= 0) col_norm[d->column[s]] = d->norm[s];
#pragma omp parallel for schedule(static) num_threads(A->threads)
    for (long f = 0; f < nf; f++)
        for (long q = d->str_start[f]; q < d->str_start[f + 1]; q++)
            A->str_len[q] = d->seg_len[q] / col_norm[f];
    /* the same segments by voxel, within a voxel by direction then streamline (counting sorts:
     * by voxel, then within each voxel by direction), each streamline-order segment told its
     * place */
    seg_key *key = dm_big_alloc((size_t)(nseg ? nseg : 1) * sizeof *key);
    if (!key || by_voxel(d, A->str_len, A->threads, vs, key) != 0) {
        free(key);
        free(col_norm);
        goto oom;
    }
    /* within each voxel, a stable counting sort by direction (the streamlines stay in order) */
    int failed = 0;
#pragma omp parallel num_threads(A->threads) reduction(| : failed)
    {
        long *hist = malloc(((size_t)k->ndirs + 1) * sizeof *hist);
        seg_key *tmp = NULL;
        long tmp_cap = 0;
#pragma omp for schedule(dynamic, 256)
        for (long v = 0; v < nv; v++) {
            const long b = vs[v], n = vs[v + 1] - b;
            if (failed || n < 2) continue;
            if (n > tmp_cap) {
                free(tmp);
                tmp_cap = 2 * n;
                tmp = malloc((size_t)tmp_cap * sizeof *tmp);
            }
            if (!hist || !tmp) {
                failed = 1;
                continue;
            }
            memset(hist, 0, ((size_t)k->ndirs + 1) * sizeof *hist);
            for (long i = 0; i < n; i++) hist[key[b + i].dir + 1]++;
            for (int o = 0; o < k->ndirs; o++) hist[o + 1] += hist[o];
            for (long i = 0; i < n; i++) tmp[hist[key[b + i].dir]++] = key[b + i];
            memcpy(key + b, tmp, (size_t)n * sizeof *key);
        }
        free(hist);
        free(tmp);
    }
    if (failed) {
        free(key);
        free(col_norm);
        goto oom;
    }
    /* the runs of one direction within each voxel */
#pragma omp parallel for schedule(static) num_threads(A->threads)
    for (long v = 0; v < nv; v++) {
        long n = 0;
        for (long p = vs[v]; p < vs[v + 1]; p++) n += p == vs[v] || key[p].dir != key[p - 1].dir;
        A->run_start[v + 1] = n;
    }
    for (long v = 0; v < nv; v++) A->run_start[v + 1] += A->run_start[v];
    A->nruns = A->run_start[nv];
    A->run_first = malloc((size_t)(A->nruns + 1) * sizeof *A->run_first);
    A->run_dir = malloc((size_t)(A->nruns ? A->nruns : 1) * sizeof *A->run_dir);
    if (!A->run_first || !A->run_dir) {
        free(key);
        free(col_norm);
        goto oom;
    }
#pragma omp parallel for schedule(static) num_threads(A->threads)
    for (long v = 0; v < nv; v++) {
        long r = A->run_start[v];
        for (long p = vs[v]; p < vs[v + 1]; p++) {
            if (p == vs[v] || key[p].dir != key[p - 1].dir) {
                A->run_first[r] = p;
                A->run_dir[r++] = key[p].dir;
            }
            A->seg_str[p] = key[p].str;
            A->seg_len[p] = key[p].len;
            A->str_run[key[p].q_lo | (long)key[p].q_hi << 32] = (unsigned)(r - 1);
        }
    }
    A->run_first[A->nruns] = nseg;
    free(key);
    /* EC: the peaks kept in each voxel, in their order (counted, then listed; voxels over all
     * threads) */
    const int ec_on = peaks && k->nec > 0;
#pragma omp parallel for schedule(static) num_threads(A->threads)
    for (long v = 0; v < (ec_on ? nv : 0); v++) {
        const float *p = peaks + (size_t)v * npeaks * 3;
        A->ec_start[v + 1] = ec_peaks(p, npeaks, vf_thr, NULL, NULL, v, NULL);
    }
    for (long v = 0; v < nv; v++) A->ec_start[v + 1] += A->ec_start[v];
    const long ne = A->ec_start[nv];
    A->ec_vox = malloc((size_t)(ne ? ne : 1) * sizeof *A->ec_vox);
    A->ec_dir = malloc((size_t)(ne ? ne : 1) * sizeof *A->ec_dir);
    if (!A->ec_vox || !A->ec_dir) {
        free(col_norm);
        goto oom;
    }
#pragma omp parallel for schedule(static) num_threads(A->threads)
    for (long v = 0; v < (ec_on ? nv : 0); v++) {
        const long e = A->ec_start[v];
        ec_peaks(peaks + (size_t)v * npeaks * 3, npeaks, vf_thr, dirs, A->ec_vox + e, v,
                 A->ec_dir + e);
    }
    const long niso = k->niso, nic = k->nic, nec = k->nec;
    A->ncols = nic * nf + nec * ne + niso * nv;
    A->nrows = nv * k->ns;
    A->scale = malloc((size_t)(A->ncols ? A->ncols : 1) * sizeof *A->scale);
    if (!A->scale) {
        free(col_norm);
        goto oom;
    }
    for (long c = 0; c < nic; c++)
        for (long f = 0; f < nf; f++) A->scale[c * nf + f] = k->ic_norm[c] * col_norm[f];
    for (long z = 0; z < nec; z++) /* the zeppelins' columns, d_perp by d_perp (COMMIT's order) */
        for (long e = 0; e < ne; e++) A->scale[nic * nf + z * ne + e] = k->ec_norm[z];
    for (long i = 0; i < niso; i++)
        for (long v = 0; v < nv; v++) A->scale[nic * nf + nec * ne + i * nv + v] = k->iso_norm[i];
    free(col_norm);
    A->op = (dm_commit_op){.ns = k->ns,
                           .niso = k->niso,
                           .nic = k->nic,
                           .nv = nv,
                           .nf = nf,
                           .ne = ne,
                           .nec = k->nec,
                           .run_start = A->run_start,
                           .run_first = A->run_first,
                           .run_dir = A->run_dir,
                           .seg_str = A->seg_str,
                           .seg_len = A->seg_len,
                           .str_start = d->str_start,
                           .str_run = A->str_run,
                           .str_len = A->str_len,
                           .ec_start = A->ec_start,
                           .ec_dir = A->ec_dir,
                           .ndirs = k->ndirs,
                           .nsp = k->nsp,
                           .lut = k->rows,
                           .niv = nv};
    free(vs);
    return 0;
oom:
    free(vs);
    dm_commit_operator_free(A);
    return dm_set_error("commit: out of memory for the operator");
}

int dm_commit_operator_iso_mask(dm_commit_operator *A, const unsigned char *iso_on)
{
    const long nv = A->op.nv, niso = A->op.niso,
               first = A->op.nic * A->op.nf + (long)A->op.nec * A->op.ne;
    long *index = malloc((size_t)(nv ? nv : 1) * sizeof *index);
    if (!index) return dm_set_error("commit: out of memory for the operator");
    long niv = 0;
    for (long v = 0; v < nv; v++) index[v] = iso_on[v] ? niv++ : -1;
    /* the balls' columns of the voxels kept, response by response; their scales as they were */
    for (long i = 0; i < niso; i++)
        for (long v = 0; v < nv; v++)
            if (index[v] >= 0) A->scale[first + i * niv + index[v]] = A->scale[first + i * nv + v];
    A->ncols = first + niso * niv;
    A->iso_index = index;
    A->op.iso_index = index;
    A->op.niv = niv;
    return 0;
}

void dm_commit_operator_free(dm_commit_operator *A)
{
    free(A->iso_index);
    free(A->run_start);
    free(A->run_first);
    free(A->run_dir);
    free(A->seg_str);
    free(A->seg_len);
    free(A->str_len);
    free(A->str_run);
    free(A->ec_start);
    free(A->ec_vox);
    free(A->ec_dir);
    free(A->scale);
    memset(A, 0, sizeof *A);
}
