/* The host's products for templates/csd/csd_solve.h (its DM_CSD_HOST loops): four dot products
 * with one vector at once, in GCC's vector types, each summed exactly as the template's one-row
 * dm_csd_dot_ / dm_csd_dotd_ sums it, so the results are theirs to the bit.  Those keep four
 * partial sums, s_t over the entries i = t (mod 4), added as (s_0 + s_1) + (s_2 + s_3): here s_t
 * is lane t of a vector, and four rows make four independent chains.  With DM_CSD_HOST_WIDE (an
 * instance compiled for AVX2) the four lanes are one 256-bit vector; without, two 128-bit
 * vectors (SSE2), as a 256-bit vector type without AVX is emulated through memory.  Never a
 * fused multiply-add: runtime/csd/csd_cpu.c enables no FMA, so every product is rounded before
 * it is added, as on the GPU, which is built without contraction.
 *
 * Included by runtime/csd/csd_cpu_instance.h once per instance, with `real`, DM_CSD_REAL_FLOAT
 * (1 when real is float) and the renamed names defined; no include guard. */
#include <string.h>

#ifndef DM_CSD_HOST_VECTOR_TYPES
#define DM_CSD_HOST_VECTOR_TYPES
typedef double dm_v2d __attribute__((vector_size(16)));
typedef double dm_v4d __attribute__((vector_size(32)));
typedef float dm_v2f __attribute__((vector_size(8)));
typedef float dm_v4f __attribute__((vector_size(16)));
typedef long long dm_v4i64 __attribute__((vector_size(32)));
typedef long long dm_v2i64 __attribute__((vector_size(16)));
typedef int dm_v4i32 __attribute__((vector_size(16)));
/* An unaligned load of a vector's worth of values. */
#define DM_VLOAD(dst, src) memcpy(&(dst), (src), sizeof(dst))
#endif

#ifdef DM_CSD_HOST_WIDE
/* Lanes 0-3 of a row's partial sums in double: a[i..i+3] (real) times v. */
#define DM_ROW4_D(acc, a, i, v)                                                                    \
    do {                                                                                           \
        dm_v4d t_;                                                                                 \
        if (DM_CSD_REAL_FLOAT) {                                                                   \
            dm_v4f f_;                                                                             \
            DM_VLOAD(f_, (const float *)(a) + (i));                                                \
            t_ = __builtin_convertvector(f_, dm_v4d);                                              \
        } else {                                                                                   \
            DM_VLOAD(t_, (const double *)(a) + (i));                                               \
        }                                                                                          \
        acc += t_ * (v);                                                                           \
    } while (0)

/* out[r] = dm_csd_dotd_(a[r], b, n) to the bit, r = 0..3 (products and sums in double). */
DM_FN void dm_csd_dotd4_(const real *const *a, const double *b, int n, double *out)
{
    const real *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    dm_v4d s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        dm_v4d v;
        DM_VLOAD(v, b + i);
        DM_ROW4_D(s0, a0, i, v);
        DM_ROW4_D(s1, a1, i, v);
        DM_ROW4_D(s2, a2, i, v);
        DM_ROW4_D(s3, a3, i, v);
    }
    for (; i < n; i++) {
        s0[0] += (double)a0[i] * b[i];
        s1[0] += (double)a1[i] * b[i];
        s2[0] += (double)a2[i] * b[i];
        s3[0] += (double)a3[i] * b[i];
    }
    /* out[r] = (s_r[0] + s_r[1]) + (s_r[2] + s_r[3]), the four rows' lanes transposed */
    const dm_v4d u0 = __builtin_shuffle(s0, s1, (dm_v4i64){0, 4, 2, 6}) +
                      __builtin_shuffle(s0, s1, (dm_v4i64){1, 5, 3, 7});
    const dm_v4d u1 = __builtin_shuffle(s2, s3, (dm_v4i64){0, 4, 2, 6}) +
                      __builtin_shuffle(s2, s3, (dm_v4i64){1, 5, 3, 7});
    const dm_v4d o = __builtin_shuffle(u0, u1, (dm_v4i64){0, 1, 4, 5}) +
                     __builtin_shuffle(u0, u1, (dm_v4i64){2, 3, 6, 7});
    memcpy(out, &o, sizeof o);
}
#undef DM_ROW4_D
#else
/* Lanes 0-1 (lo) and 2-3 (hi) of a row's partial sums in double. */
#define DM_ROW4_D(lo, hi, a, i, vl, vh)                                                            \
    do {                                                                                           \
        dm_v2d tl_, th_;                                                                           \
        if (DM_CSD_REAL_FLOAT) {                                                                   \
            dm_v2f fl_, fh_;                                                                       \
            DM_VLOAD(fl_, (const float *)(a) + (i));                                               \
            DM_VLOAD(fh_, (const float *)(a) + (i) + 2);                                           \
            tl_ = __builtin_convertvector(fl_, dm_v2d);                                            \
            th_ = __builtin_convertvector(fh_, dm_v2d);                                            \
        } else {                                                                                   \
            DM_VLOAD(tl_, (const double *)(a) + (i));                                              \
            DM_VLOAD(th_, (const double *)(a) + (i) + 2);                                          \
        }                                                                                          \
        lo += tl_ * (vl);                                                                          \
        hi += th_ * (vh);                                                                          \
    } while (0)

DM_FN void dm_csd_dotd4_(const real *const *a, const double *b, int n, double *out)
{
    const real *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    dm_v2d l0 = {0}, l1 = {0}, l2 = {0}, l3 = {0}, h0 = {0}, h1 = {0}, h2 = {0}, h3 = {0};
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        dm_v2d vl, vh;
        DM_VLOAD(vl, b + i);
        DM_VLOAD(vh, b + i + 2);
        DM_ROW4_D(l0, h0, a0, i, vl, vh);
        DM_ROW4_D(l1, h1, a1, i, vl, vh);
        DM_ROW4_D(l2, h2, a2, i, vl, vh);
        DM_ROW4_D(l3, h3, a3, i, vl, vh);
    }
    for (; i < n; i++) {
        l0[0] += (double)a0[i] * b[i];
        l1[0] += (double)a1[i] * b[i];
        l2[0] += (double)a2[i] * b[i];
        l3[0] += (double)a3[i] * b[i];
    }
    /* out[r] = (l_r[0] + l_r[1]) + (h_r[0] + h_r[1]), two rows' lanes transposed at a time */
    const dm_v2i64 even = {0, 2}, odd = {1, 3};
    const dm_v2d o01 = (__builtin_shuffle(l0, l1, even) + __builtin_shuffle(l0, l1, odd)) +
                       (__builtin_shuffle(h0, h1, even) + __builtin_shuffle(h0, h1, odd));
    const dm_v2d o23 = (__builtin_shuffle(l2, l3, even) + __builtin_shuffle(l2, l3, odd)) +
                       (__builtin_shuffle(h2, h3, even) + __builtin_shuffle(h2, h3, odd));
    memcpy(out, &o01, sizeof o01);
    memcpy(out + 2, &o23, sizeof o23);
}
#undef DM_ROW4_D
#endif

/* out[r] = dm_csd_dot_(a[r], b, n) to the bit, r = 0..3 (products and sums in `real`).  In
 * double it is dm_csd_dotd4_; in float, four floats are one 128-bit vector on either
 * instruction set. */
DM_FN void dm_csd_dot4_(const real *const *a, const real *b, int n, real *out)
{
    if (!DM_CSD_REAL_FLOAT) {
        double o[4];
        dm_csd_dotd4_(a, (const double *)b, n, o);
        for (int r = 0; r < 4; r++) out[r] = (real)o[r];
        return;
    }
    const float *a0 = (const float *)a[0], *a1 = (const float *)a[1], *a2 = (const float *)a[2],
                *a3 = (const float *)a[3], *bf = (const float *)b;
    dm_v4f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        dm_v4f v, t;
        DM_VLOAD(v, bf + i);
        DM_VLOAD(t, a0 + i);
        s0 += t * v;
        DM_VLOAD(t, a1 + i);
        s1 += t * v;
        DM_VLOAD(t, a2 + i);
        s2 += t * v;
        DM_VLOAD(t, a3 + i);
        s3 += t * v;
    }
    for (; i < n; i++) {
        s0[0] += a0[i] * bf[i];
        s1[0] += a1[i] * bf[i];
        s2[0] += a2[i] * bf[i];
        s3[0] += a3[i] * bf[i];
    }
    const dm_v4f u0 = __builtin_shuffle(s0, s1, (dm_v4i32){0, 4, 2, 6}) +
                      __builtin_shuffle(s0, s1, (dm_v4i32){1, 5, 3, 7});
    const dm_v4f u1 = __builtin_shuffle(s2, s3, (dm_v4i32){0, 4, 2, 6}) +
                      __builtin_shuffle(s2, s3, (dm_v4i32){1, 5, 3, 7});
    const dm_v4f o = __builtin_shuffle(u0, u1, (dm_v4i32){0, 1, 4, 5}) +
                     __builtin_shuffle(u0, u1, (dm_v4i32){2, 3, 6, 7});
    for (int r = 0; r < 4; r++) out[r] = (real)o[r];
}

/* The soft solver's Cholesky, four rows below column j at once: rows[t][j] = (rows[t][j] -
 * dm_csd_dot_(rows[t], Lj, j)) / d, the four quotients as one vector (each correctly rounded,
 * as the scalar division). */
DM_FN void dm_csd_chol_rows4_(real *const *rows, const real *Lj, int j, real d)
{
    real s[4];
    dm_csd_dot4_((const real *const *)rows, Lj, j, s);
#if DM_CSD_REAL_FLOAT
    dm_v4f x = {rows[0][j], rows[1][j], rows[2][j], rows[3][j]}, sv;
#elif defined(DM_CSD_HOST_WIDE)
    dm_v4d x = {rows[0][j], rows[1][j], rows[2][j], rows[3][j]}, sv;
#else
    dm_v2d x = {rows[0][j], rows[1][j]}, y = {rows[2][j], rows[3][j]}, sv, sw;
    memcpy(&sw, s + 2, sizeof sw);
    y = (y - sw) / d;
    rows[2][j] = y[0];
    rows[3][j] = y[1];
#endif
    memcpy(&sv, s, sizeof sv);
    x = (x - sv) / d;
    for (int t = 0; t < (int)(sizeof x / sizeof(real)); t++) rows[t][j] = x[t];
}

/* The soft solver's update of S (n x n, lower triangle packed by rows) by the directions of
 * flip[0..nflip): S += C_i' C_i for flip[f] = i >= 0, S -= C_i' C_i for flip[f] = ~i, C's rows
 * n long.  Entry by entry the same sum as the template's loop over the directions, one after
 * another in the list's order, each term (+-C_i[r]) C_i[c] rounded before it is added.  Here
 * the directions pass in groups of DM_CSD_FLIP_GROUP (their rows stay in the first-level cache)
 * while an entry of S stays in a register, where the loop over single directions loads and
 * stores all of S for each. */
#define DM_CSD_FLIP_GROUP 16
#if DM_CSD_REAL_FLOAT
#define DM_RV dm_v4f
#define DM_RW 4
#elif defined(DM_CSD_HOST_WIDE)
#define DM_RV dm_v4d
#define DM_RW 4
#else
#define DM_RV dm_v2d
#define DM_RW 2
#endif
DM_FN void dm_csd_rank_update_(real *S, int n, const real *C, const int *flip, int nflip)
{
    for (int f0 = 0; f0 < nflip; f0 += DM_CSD_FLIP_GROUP) {
        const int nf = nflip - f0 < DM_CSD_FLIP_GROUP ? nflip - f0 : DM_CSD_FLIP_GROUP;
        const real *row[DM_CSD_FLIP_GROUP];
        int neg[DM_CSD_FLIP_GROUP];
        for (int f = 0; f < nf; f++) {
            const int v = flip[f0 + f];
            neg[f] = v < 0;
            row[f] = C + (long)(v < 0 ? ~v : v) * n;
        }
        for (int r = 0; r < n; r++) {
            real *Sr = S + (long)r * (r + 1) / 2, a[DM_CSD_FLIP_GROUP];
            for (int f = 0; f < nf; f++) a[f] = neg[f] ? -row[f][r] : row[f][r];
            int c = 0;
            for (; c + 2 * DM_RW <= r + 1; c += 2 * DM_RW) { /* two vectors of the row */
                DM_RV s0, s1;
                DM_VLOAD(s0, Sr + c);
                DM_VLOAD(s1, Sr + c + DM_RW);
                for (int f = 0; f < nf; f++) {
                    DM_RV t0, t1;
                    DM_VLOAD(t0, row[f] + c);
                    DM_VLOAD(t1, row[f] + c + DM_RW);
                    s0 += a[f] * t0;
                    s1 += a[f] * t1;
                }
                memcpy(Sr + c, &s0, sizeof s0);
                memcpy(Sr + c + DM_RW, &s1, sizeof s1);
            }
            for (; c + DM_RW <= r + 1; c += DM_RW) {
                DM_RV s0;
                DM_VLOAD(s0, Sr + c);
                for (int f = 0; f < nf; f++) {
                    DM_RV t0;
                    DM_VLOAD(t0, row[f] + c);
                    s0 += a[f] * t0;
                }
                memcpy(Sr + c, &s0, sizeof s0);
            }
            if (c <= r && c + DM_RW <= n) {
                /* the row's last entries as one vector: its lanes past the row's end read the
                 * next row of S (the workspace goes on: DM_CSD_WORK) and of each C_i, and are
                 * not stored */
                DM_RV s0;
                DM_VLOAD(s0, Sr + c);
                for (int f = 0; f < nf; f++) {
                    DM_RV t0;
                    DM_VLOAD(t0, row[f] + c);
                    s0 += a[f] * t0;
                }
                memcpy(Sr + c, &s0, (size_t)(r + 1 - c) * sizeof(real));
                c = r + 1;
            }
            for (; c <= r; c++) {
                real s0 = Sr[c];
                for (int f = 0; f < nf; f++) s0 += a[f] * row[f][c];
                Sr[c] = s0;
            }
        }
    }
}
#undef DM_RV
#undef DM_RW
