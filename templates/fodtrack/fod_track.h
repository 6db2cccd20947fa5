/* FOD streamline tractography as MRtrix's tckgen does it (iFOD2, iFOD1, SD_STREAM), one source
 * for the host threads (runtime/fodtrack/fodtrack_cpu.c) and the GPU (gpu_fodtrack.cu).
 *
 * A streamline is traced by a small state machine so that a GPU thread can advance whichever
 * streamline it holds by one step per turn of its loop, and take the next one the moment its
 * own ends (docs/tracking.md):
 *     ft_seed     draw the seed of streamline `id` and its initial direction (0: rejected seed)
 *     ft_step     one turn: one arc of iFOD2 (a calibration arc or a proposal; an accepted one
 *                 adds its nsub points), one step of iFOD1 or SD_STREAM; every new point goes
 *                 through tckgen's checks (mask, exclude, include, stop, length); returns 1 when
 *                 the current half has ended
 *     ft_turn     after the first half: reverse it and start the second from the seed (1), or
 *                 0 when the streamline is complete
 *     ft_finish   tckgen's acceptance: too short, includes missed, excluded; iFOD2's output
 *                 downsampled (every nsub-th point, the seed kept) and cut at the maximum length
 *
 * Every decision draws from the streamline's own Philox stream (rseed, id), and every
 * operation is + - * / or sqrt (det_math.h for the angles), so the host and the GPU (compiled
 * with --fmad=false) trace the same points in double.
 *
 * Points are world (scanner) mm, directions unit vectors in world axes, the frame of MRtrix's
 * FODs.  The facts of tckgen followed here (defaults, which point is kept at which
 * termination, the calibrated envelope) are listed in docs/tracking.md.
 *
 * No include guard (once per precision).  Before including: `real`, DM_FN, DM_FT, philox.h,
 * ft_types.h, det_math.h, fod_field.h. */

/* iFOD2's points per arc: a constant in the GPU build (DM_FT_NSUB), so that the arc's arrays
 * live in registers. */
#ifdef DM_FT_NSUB
#define DM_FT_NS(c) DM_FT_NSUB
#else
#define DM_FT_NS(c) ((c)->nsub)
#endif
/* The algorithm and whether ACT is on: constants in the GPU build too (DM_FT_ALGORITHM,
 * DM_FT_ACT), so that its kernel holds one algorithm's code and the registers it needs. */
#ifdef DM_FT_ALGORITHM
#define DM_FT_ALG(c) DM_FT_ALGORITHM
#define DM_FT_ACT_ON(c) (DM_FT_ACT && (c)->act.on)
#else
#define DM_FT_ALG(c) ((c)->algorithm)
#define DM_FT_ACT_ON(c) ((c)->act.on)
#endif

/* The state of the streamline a thread is tracing. */
typedef struct {
    dm_rng rng;
    real pos[3], dir[3];           /* the current point and direction */
    real seed_pos[3], seed_dir[3]; /* for the second half */
    real half_prob0;               /* iFOD2: sqrt of the FOD amplitude where the next arc starts */
    real seed_half_prob0;
    real max_val;     /* iFOD2, iFOD1: the envelope of the step under way */
    int arc;          /* iFOD2: arcs evaluated in the step under way (calibration, then trials);
                         iFOD1: amplitudes evaluated in it */
    int n;            /* points in the buffer */
    int half;         /* 1 or 2 */
    int seed_index;   /* of the seed among the points, once the halves are joined */
    int excluded;     /* entered an exclusion region: rejected */
    unsigned visited; /* include regions visited (bits) */
    int end1, end2;   /* terminations of the halves (DM_FT_END_*) */
    int sgm_depth;    /* ACT: points in a row within sub-cortical grey matter */
    int seed_in_sgm, reached_wm, act_rejected;
    int unidirectional; /* --unidirectional, or an ACT seed on the grey side of the interface */
    int backtrack_step, backtrack_tries, longest; /* ACT --backtrack (see ft_backtrack) */
    unsigned truncations;     /* proposals above the envelope (tckgen counts them too) */
    unsigned long long evals; /* FOD amplitudes evaluated (the work: see bench/) */
} DM_FT(state);

/* Uniform deviate in (0, 1) at the build's precision. */
DM_FN real DM_FT(ft_uniform)(dm_rng *r)
{
    return (real)dm_rng_uniform(r);
}

/* MRtrix's rotate_direction: the rotation about z x ref that takes z to ref, applied to v. */
DM_FN void DM_FT(ft_rotate)(const real ref[3], const real v[3], real out[3])
{
    real n2 = ref[0] * ref[0] + ref[1] * ref[1];
    if (n2 == 0) {
        real s = ref[2] < 0 ? (real)-1 : (real)1;
        for (int i = 0; i < 3; i++) out[i] = s * v[i];
        return;
    }
    real n = sqrt(n2), mx = ref[0] / n, my = ref[1] / n;
    real alpha = v[2], beta = v[0] * mx + v[1] * my;
    out[0] = v[0] + alpha * ref[0] + beta * (ref[2] * mx - mx);
    out[1] = v[1] + alpha * ref[1] + beta * (ref[2] * my - my);
    out[2] = v[2] + alpha * (ref[2] - 1) + beta * (-n);
}

/* A direction uniform on the sphere (a point of the unit ball by rejection, normalised). */
DM_FN void DM_FT(ft_random_direction)(dm_rng *r, real d[3])
{
    real n2;
    do {
        for (int i = 0; i < 3; i++) d[i] = 2 * DM_FT(ft_uniform)(r) - 1;
        n2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    } while (n2 > 1 || n2 < (real)1e-12);
    real n = sqrt(n2);
    for (int i = 0; i < 3; i++) d[i] /= n;
}

/* A direction uniform over the cap of half-angle acos(cos_max) around the unit vector d (as
 * tckgen's proposals): cos(theta) uniform in [cos_max, 1], the azimuth from a point of the
 * unit disc. */
DM_FN void DM_FT(ft_cone_direction)(dm_rng *r, const real d[3], real cos_max, real out[3])
{
    real ct = 1 - DM_FT(ft_uniform)(r) * (1 - cos_max), st = sqrt(1 - ct * ct), x, y, r2;
    do {
        x = 2 * DM_FT(ft_uniform)(r) - 1;
        y = 2 * DM_FT(ft_uniform)(r) - 1;
        r2 = x * x + y * y;
    } while (r2 > 1 || r2 < (real)1e-12);
    real rn = sqrt(r2);
    real local[3] = {st * x / rn, st * y / rn, ct};
    DM_FT(ft_rotate)(d, local, out);
}

/* The FOD's coefficients at p as tckgen's masked linear interpolator gives them: invalid (0)
 * outside the image or where the nearest voxel's FOD is zero. */
DM_FN int DM_FT(ft_fod_at)(const dm_ft_ctx *c, const real p[3], real *coef)
{
    return DM_FT(fod_interp)(&c->fod, p, coef);
}

DM_FN real DM_FT(ft_amp)(const dm_ft_ctx *c, const real *coef, const real d[3])
{
    return DM_FT(fod_amplitude)(&c->fod, coef, d);
}

/* ---- regions of interest ---- */

/* 1 when p lies in ROI k (its nearest voxel is set; outside the image is outside). */
DM_FN int DM_FT(ft_in_roi)(const dm_ft_ctx *c, int k, const real p[3])
{
    const dm_ft_roi *r = &c->roi[k];
    real v[3];
    DM_FT(fod_affine)(r->w2v, p, v);
    int i[3];
    const int n[3] = {r->nx, r->ny, r->nz};
    for (int a = 0; a < 3; a++) {
        real f = floor(v[a] + (real)0.5);
        if (f < 0 || f > n[a] - 1) return 0;
        i[a] = (int)f;
    }
    return c->roi_data[r->offset + ((long)i[2] * n[1] + i[1]) * n[0] + i[0]] != 0;
}

DM_FN int DM_FT(ft_in_kind)(const dm_ft_ctx *c, int kind, const real p[3])
{
    for (int k = 0; k < c->nroi; k++)
        if (c->roi[k].kind == kind && DM_FT(ft_in_roi)(c, k, p)) return 1;
    return 0;
}

/* The include ROIs that contain p, as bits. */
DM_FN unsigned DM_FT(ft_include_bits)(const dm_ft_ctx *c, const real p[3])
{
    unsigned bits = 0;
    for (int k = 0; k < c->nroi; k++)
        if (c->roi[k].kind == DM_FT_ROI_INCLUDE && DM_FT(ft_in_roi)(c, k, p))
            bits |= 1u << c->roi[k].include_bit;
    return bits;
}

/* ---- ACT: the five-tissue image ---- */

/* The tissues at p, interpolated as the FOD is (invalid outside the image or where the nearest
 * voxel is empty), each clamped to [0, 1]; 0 (invalid) also when they sum below 0.5. */
DM_FN int DM_FT(ft_tissues)(const dm_ft_ctx *c, const real p[3], real t[5])
{
    const dm_ft_act *a = &c->act;
    const int n[3] = {a->nx, a->ny, a->nz};
    int lo[3], hi[3], near[3];
    real w[3];
    if (!DM_FT(fod_corners)(a->w2v, n, p, lo, hi, w, near)) return 0;
    const float *nv = a->tissue + 5 * (((long)near[2] * n[1] + near[1]) * n[0] + near[0]);
    if (nv[0] == 0 && nv[1] == 0 && nv[2] == 0 && nv[3] == 0 && nv[4] == 0) return 0;
    for (int k = 0; k < 5; k++) t[k] = 0;
    for (int corner = 0; corner < 8; corner++) {
        real wt = (corner & 1 ? w[0] : 1 - w[0]) * (corner & 2 ? w[1] : 1 - w[1]) *
                  (corner & 4 ? w[2] : 1 - w[2]);
        if (wt == 0) continue;
        int x = corner & 1 ? hi[0] : lo[0], y = corner & 2 ? hi[1] : lo[1],
            z = corner & 4 ? hi[2] : lo[2];
        const float *src = a->tissue + 5 * (((long)z * n[1] + y) * n[0] + x);
        for (int k = 0; k < 5; k++) t[k] += wt * (real)src[k];
    }
    real sum = 0;
    for (int k = 0; k < 5; k++) {
        if (!(t[k] == t[k])) return 0; /* NaN */
        t[k] = t[k] < 0 ? 0 : t[k] > 1 ? 1 : t[k];
        sum += t[k];
    }
    return sum >= (real)0.5;
}

/* MRtrix's tissue classes of interpolated values. */
DM_FN int DM_FT(ft_is_csf)(const real t[5])
{
    return t[DM_FT_CSF] >= t[DM_FT_CGM] && t[DM_FT_CSF] >= t[DM_FT_SGM] &&
           t[DM_FT_CSF] >= t[DM_FT_WM] && t[DM_FT_CSF] >= t[DM_FT_PATH];
}
DM_FN int DM_FT(ft_is_gm)(const real t[5])
{
    real gm = t[DM_FT_CGM] + t[DM_FT_SGM];
    return gm >= t[DM_FT_WM] && gm > t[DM_FT_CSF] && gm > t[DM_FT_PATH];
}
DM_FN int DM_FT(ft_is_sgm)(const real t[5])
{
    return t[DM_FT_SGM] > t[DM_FT_CGM] && t[DM_FT_SGM] >= t[DM_FT_WM] &&
           t[DM_FT_SGM] > t[DM_FT_CSF] && t[DM_FT_SGM] > t[DM_FT_PATH];
}
DM_FN int DM_FT(ft_is_path)(const real t[5])
{
    return t[DM_FT_PATH] >= t[DM_FT_CGM] && t[DM_FT_PATH] >= t[DM_FT_SGM] &&
           t[DM_FT_PATH] >= t[DM_FT_WM] && t[DM_FT_PATH] > t[DM_FT_CSF];
}

/* GM - WM at p (the interface is its zero); 2 (far from it) where the tissues are invalid. */
DM_FN real DM_FT(ft_gm_minus_wm)(const dm_ft_ctx *c, const real p[3])
{
    real t[5];
    if (!DM_FT(ft_tissues)(c, p, t)) return 2;
    return t[DM_FT_CGM] + t[DM_FT_SGM] - t[DM_FT_WM];
}

/* --crop-at-gmwmi, as tckgen: when the last segment crosses the grey-white interface (the point
 * before it on the white side, GM < WM, the last one past the interface by 0.01 or more), the
 * last point moves back onto the interface, on its grey side: 0 <= GM - WM < 0.01, found by
 * bisection along the segment (10 halvings at most; tckgen bisects along a Hermite curve through
 * the last points). */
DM_FN void DM_FT(ft_crop_at_gmwmi)(const dm_ft_ctx *c, real *buf, int n)
{
    if (n < 2) return;
    real *a = buf + 3 * (n - 2), *b = buf + 3 * (n - 1), lo = 0, hi = 1, q[3];
    if (!(DM_FT(ft_gm_minus_wm)(c, a) < 0) || !(DM_FT(ft_gm_minus_wm)(c, b) >= (real)0.01)) return;
    for (int it = 0; it < 10; it++) {
        real mid = (lo + hi) / 2;
        for (int k = 0; k < 3; k++) q[k] = a[k] + mid * (b[k] - a[k]);
        real g = DM_FT(ft_gm_minus_wm)(c, q);
        if (g < 0) {
            lo = mid;
        } else {
            hi = mid;
            if (g < (real)0.01) break;
        }
    }
    for (int k = 0; k < 3; k++) b[k] = a[k] + hi * (b[k] - a[k]);
}

/* tckgen's structural check of a new point p under ACT: DM_FT_END_CONTINUE, or a termination;
 * *keep: whether p joins the streamline (entering cortical GM or CSF). */
DM_FN int DM_FT(ft_act_check)(const dm_ft_ctx *c, DM_FT(state) * s, const real p[3], int *keep)
{
    real t[5];
    *keep = 0;
    if (!DM_FT(ft_tissues)(c, p, t)) return DM_FT_END_EXIT_IMAGE;
    if (DM_FT(ft_is_csf)(t)) {
        if (s->sgm_depth > 0) return DM_FT_END_EXIT_SGM;
        *keep = 1;
        return DM_FT_END_ENTER_CSF;
    }
    if (DM_FT(ft_is_gm)(t)) {
        if (t[DM_FT_CGM] >= t[DM_FT_SGM]) {
            *keep = 1;
            return DM_FT_END_ENTER_CGM;
        }
        s->sgm_depth++;
    } else if (s->sgm_depth > 0) {
        if (s->seed_in_sgm && !s->reached_wm) {
            s->reached_wm = 1;
            s->sgm_depth = 0;
        } else {
            return DM_FT_END_EXIT_SGM;
        }
    }
    return DM_FT_END_CONTINUE;
}

/* ---- a new point and tckgen's checks on it ---- */

/* Records p as the next point when the termination keeps it, and applies the checks tckgen
 * makes at every point (in its order): the mask (EXIT_MASK, point dropped), the exclusion
 * regions (point kept, streamline rejected), the include regions, --stop once all are
 * visited, and the point budget (LENGTH_EXCEED); under ACT first the tissues (ft_act_check).
 * Returns the termination (CONTINUE: go on). */
DM_FN int DM_FT(ft_add_point)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf, const real p[3],
                              const real d[3])
{
    if (DM_FT_ACT_ON(c)) {
        int keep, t = DM_FT(ft_act_check)(c, s, p, &keep);
        if (t != DM_FT_END_CONTINUE) {
            if (keep) {
                for (int i = 0; i < 3; i++) {
                    buf[3 * s->n + i] = p[i];
                    s->pos[i] = p[i];
                    s->dir[i] = d[i];
                }
                s->n++;
                if (t == DM_FT_END_ENTER_CGM && c->act.crop_at_gmwmi)
                    DM_FT(ft_crop_at_gmwmi)(c, buf, s->n);
            }
            return t;
        }
    }
    if (c->has_mask && !DM_FT(ft_in_kind)(c, DM_FT_ROI_MASK, p)) return DM_FT_END_EXIT_MASK;
    for (int i = 0; i < 3; i++) {
        buf[3 * s->n + i] = p[i];
        s->pos[i] = p[i];
        s->dir[i] = d[i];
    }
    s->n++;
    if (c->has_exclude && DM_FT(ft_in_kind)(c, DM_FT_ROI_EXCLUDE, p)) {
        s->excluded = 1;
        return DM_FT_END_ENTER_EXCLUDE;
    }
    if (c->include_all) {
        s->visited |= DM_FT(ft_include_bits)(c, p);
        if (c->stop_on_include && s->visited == c->include_all)
            return DM_FT_END_TRAVERSE_ALL_INCLUDE;
    }
    if (s->n >= c->max_pts_pre) return DM_FT_END_LENGTH_EXCEED;
    return DM_FT_END_CONTINUE;
}

/* ---- iFOD2 ---- */

/* The nsub samples (positions, tangents) of the arc of length step that leaves p along d and
 * ends along e: a circle of radius step / theta, theta the angle between d and e. */
DM_FN void DM_FT(ft_arc)(const dm_ft_ctx *c, const real p[3], const real d[3], const real e[3],
                         real *pts, real *tan)
{
    const int ns = DM_FT_NS(c);
    real ct = d[0] * e[0] + d[1] * e[1] + d[2] * e[2];
    if (ct > 1) ct = 1;
    real theta = DM_FT(det_acos)(ct);
    if (theta == 0) {
        DM_FT_UNROLL
        for (int i = 0; i < ns; i++)
            for (int a = 0; a < 3; a++) {
                pts[3 * i + a] = p[a] + ((real)(i + 1) * (real)c->step / ns) * d[a];
                tan[3 * i + a] = d[a];
            }
        return;
    }
    real k[3] = {e[0] - ct * d[0], e[1] - ct * d[1], e[2] - ct * d[2]};
    real kn = sqrt(k[0] * k[0] + k[1] * k[1] + k[2] * k[2]);
    for (int a = 0; a < 3; a++) k[a] /= kn;
    real radius = (real)c->step / theta;
    DM_FT_UNROLL
    for (int i = 0; i < ns; i++) {
        real sa, ca;
        DM_FT(det_sincos)(theta * (i + 1) / ns, &sa, &ca);
        for (int a = 0; a < 3; a++) {
            pts[3 * i + a] = p[a] + radius * (sa * d[a] + (1 - ca) * k[a]);
            tan[3 * i + a] = i == ns - 1 ? e[a] : ca * d[a] + sa * k[a];
        }
    }
}

/* fod_power-th power of x > 0 (exact forms for tckgen's defaults 1/4 and 1). */
DM_FN real DM_FT(ft_pow)(const dm_ft_ctx *c, real x)
{
    switch (c->power_kind) {
    case DM_FT_POWER_ONE: return x;
    case DM_FT_POWER_HALF: return sqrt(x);
    case DM_FT_POWER_QUARTER: return sqrt(sqrt(x));
    default: return DM_FT(det_exp)((real)c->power * DM_FT(det_log)(x));
    }
}

/* The path value of an arc: (sqrt(f0) f1 ... f_{n-1} sqrt(f_n))^power over its samples, f the
 * FOD amplitude along the tangent; 0 when a sample is below the cutoff, -1 (tckgen's NaN) when
 * one is outside the valid FOD.  *half_last: sqrt(f_n), the next arc's sqrt(f0). */
DM_FN real DM_FT(ft_path_value)(const dm_ft_ctx *c, real half_first, const real *pts,
                                const real *tan, real *half_last)
{
    real prod = half_first;
    if (DM_FT_ACT_ON(
            c)) { /* an arc that ends in CSF has no value; one that ends nowhere, no value */
        real t[5];
        if (!DM_FT(ft_tissues)(c, pts + 3 * (DM_FT_NS(c) - 1), t)) return -1;
        if (t[DM_FT_CSF] >= (real)0.5) return 0;
    }
    DM_FT_UNROLL
    for (int i = 0; i < DM_FT_NS(c); i++) {
        real f;
        if (!DM_FT(fod_amp_at)(&c->fod, pts + 3 * i, tan + 3 * i, &f)) return -1;
        if (!(f >= (real)c->threshold)) return 0;
        if (i == DM_FT_NS(c) - 1) {
            *half_last = sqrt(f);
            prod *= *half_last;
        } else {
            prod *= f;
        }
    }
    return DM_FT(ft_pow)(c, prod);
}

/* One arc of iFOD2 per call, so that the lanes of a GPU warp all evaluate one arc per turn
 * whatever phase their streamlines are in: first the calibration arcs (the envelope: their
 * largest value times the calibrated ratio), then proposals drawn in the cone and accepted by
 * rejection sampling; an accepted arc's points each go through ft_add_point.  Returns
 * DM_FT_PENDING while the step is under way. */
DM_FN int DM_FT(ft_step_ifod2)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf)
{
    real pts[3 * DM_FT_MAX_SUB], tan[3 * DM_FT_MAX_SUB], e[3], half_last = 0;
    const int calibrating = s->arc < c->ncalib;
    if (calibrating) {
        real local[3] = {(real)c->calib[3 * s->arc], (real)c->calib[3 * s->arc + 1],
                         (real)c->calib[3 * s->arc + 2]};
        DM_FT(ft_rotate)(s->dir, local, e);
    } else {
        DM_FT(ft_cone_direction)(&s->rng, s->dir, (real)c->cos_max_angle, e);
    }
    DM_FT(ft_arc)(c, s->pos, s->dir, e, pts, tan);
    real v = DM_FT(ft_path_value)(c, s->half_prob0, pts, tan, &half_last);
    s->evals += (unsigned long long)DM_FT_NS(c);
    s->arc++;
    if (calibrating) {
        if (v < 0) return DM_FT_END_EXIT_IMAGE;
        if (v > s->max_val) s->max_val = v;
        if (s->arc < c->ncalib) return DM_FT_PENDING;
        if (!(s->max_val > 0)) return DM_FT_END_CALIBRATOR;
        s->max_val *= (real)c->calib_ratio;
        return DM_FT_PENDING;
    }
    if (v > s->max_val) s->truncations++;
    if (v > 0 && DM_FT(ft_uniform)(&s->rng) * s->max_val < v) {
        s->half_prob0 = half_last;
        s->arc = 0;
        s->max_val = 0;
        for (int i = 0; i < DM_FT_NS(c); i++) {
            int t = DM_FT(ft_add_point)(c, s, buf, pts + 3 * i, tan + 3 * i);
            if (t != DM_FT_END_CONTINUE) return t;
        }
        return DM_FT_END_CONTINUE;
    }
    return s->arc - c->ncalib < c->max_trials ? DM_FT_PENDING : DM_FT_END_MODEL;
}

/* ---- iFOD1 ---- */

/* One FOD amplitude of iFOD1 per call, for the same reason as iFOD2's one arc: the step's
 * first call interpolates the coefficients at the current point (kept in coef until the step
 * ends), then come the calibration directions (the envelope), then proposals in the cone
 * accepted by rejection sampling.  The draws are tckgen's, in its order.  Returns
 * DM_FT_PENDING while the step is under way. */
DM_FN int DM_FT(ft_step_ifod1)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf, real *coef)
{
    if (s->arc == 0 && !DM_FT(ft_fod_at)(c, s->pos, coef)) return DM_FT_END_EXIT_IMAGE;
    real e[3];
    s->evals++;
    if (s->arc < c->ncalib) {
        real local[3] = {(real)c->calib[3 * s->arc], (real)c->calib[3 * s->arc + 1],
                         (real)c->calib[3 * s->arc + 2]};
        DM_FT(ft_rotate)(s->dir, local, e);
        real v = DM_FT(ft_amp)(c, coef, e);
        if (v > s->max_val) s->max_val = v;
        if (++s->arc < c->ncalib) return DM_FT_PENDING;
        if (!(s->max_val > 0)) return DM_FT_END_CALIBRATOR;
        s->max_val = DM_FT(ft_pow)(c, s->max_val) * (real)c->calib_ratio;
        return DM_FT_PENDING;
    }
    DM_FT(ft_cone_direction)(&s->rng, s->dir, (real)c->cos_max_angle, e);
    real f = DM_FT(ft_amp)(c, coef, e);
    s->arc++;
    if (f > (real)c->threshold) {
        real v = DM_FT(ft_pow)(c, f);
        if (v > s->max_val) s->truncations++;
        if (DM_FT(ft_uniform)(&s->rng) * s->max_val < v) {
            s->arc = 0;
            s->max_val = 0;
            real p[3];
            for (int a = 0; a < 3; a++) p[a] = s->pos[a] + (real)c->step * e[a];
            return DM_FT(ft_add_point)(c, s, buf, p, e);
        }
    }
    return s->arc - c->ncalib < c->max_trials ? DM_FT_PENDING : DM_FT_END_MODEL;
}

/* ---- SD_STREAM ---- */

/* Two unit vectors completing u to an orthonormal frame. */
DM_FN void DM_FT(ft_frame)(const real u[3], real e1[3], real e2[3])
{
    real a[3] = {0, 0, 0};
    int k = fabs(u[0]) < fabs(u[1]) ? (fabs(u[0]) < fabs(u[2]) ? 0 : 2)
                                    : (fabs(u[1]) < fabs(u[2]) ? 1 : 2);
    a[k] = 1;
    real dot = a[0] * u[0] + a[1] * u[1] + a[2] * u[2];
    for (int i = 0; i < 3; i++) e1[i] = a[i] - dot * u[i];
    real n = sqrt(e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2]);
    for (int i = 0; i < 3; i++) e1[i] /= n;
    e2[0] = u[1] * e1[2] - u[2] * e1[1];
    e2[1] = u[2] * e1[0] - u[0] * e1[2];
    e2[2] = u[0] * e1[1] - u[1] * e1[0];
}

/* The amplitude at the unit vector u + a e1 + b e2, normalised. */
DM_FN real DM_FT(ft_amp_off)(const dm_ft_ctx *c, const real *coef, const real u[3],
                             const real e1[3], const real e2[3], real a, real b)
{
    real v[3];
    for (int i = 0; i < 3; i++) v[i] = u[i] + a * e1[i] + b * e2[i];
    real n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int i = 0; i < 3; i++) v[i] /= n;
    return DM_FT(ft_amp)(c, coef, v);
}

/* The FOD peak nearest u, by tckgen's search (Newton along the gradient on the sphere, steps of
 * at most 0.2 rad, converged when the step is below 1e-4 rad, 50 iterations at most); the
 * derivatives are central differences over 0.01 rad in the tangent plane.  u is replaced by
 * the peak; returns its amplitude, or -1 when the search does not converge. */
DM_FN real DM_FT(ft_peak)(const dm_ft_ctx *c, const real *coef, real u[3])
{
    const real h = (real)0.01;
    for (int it = 0; it < 50; it++) {
        real e1[3], e2[3];
        DM_FT(ft_frame)(u, e1, e2);
        real f0 = DM_FT(ft_amp)(c, coef, u);
        real g1 = (DM_FT(ft_amp_off)(c, coef, u, e1, e2, h, 0) -
                   DM_FT(ft_amp_off)(c, coef, u, e1, e2, -h, 0)) /
                  (2 * h);
        real g2 = (DM_FT(ft_amp_off)(c, coef, u, e1, e2, 0, h) -
                   DM_FT(ft_amp_off)(c, coef, u, e1, e2, 0, -h)) /
                  (2 * h);
        real gn = sqrt(g1 * g1 + g2 * g2);
        if (gn == 0) return f0;
        g1 /= gn;
        g2 /= gn;
        /* along the great circle of the gradient: f(t) ~ f0 + t D1 + t^2 D2 / 2 */
        real fp = DM_FT(ft_amp_off)(c, coef, u, e1, e2, h * g1, h * g2);
        real fm = DM_FT(ft_amp_off)(c, coef, u, e1, e2, -h * g1, -h * g2);
        real d1 = (fp - fm) / (2 * h), d2 = (fp - 2 * f0 + fm) / (h * h);
        real dt = d2 != 0 ? -d1 / d2 : 0;
        if (dt < 0) dt = -dt;
        if (dt > (real)0.2) dt = (real)0.2;
        /* move by the angle dt along g: tan(dt) in the tangent plane, then normalise */
        real st, ctt;
        DM_FT(det_sincos)(dt, &st, &ctt);
        for (int i = 0; i < 3; i++) u[i] = ctt * u[i] + st * (g1 * e1[i] + g2 * e2[i]);
        real n = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        for (int i = 0; i < 3; i++) u[i] /= n;
        if (dt < (real)1e-4) return f0;
    }
    return -1;
}

DM_FN int DM_FT(ft_step_sdstream)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf, real *coef)
{
    if (!DM_FT(ft_fod_at)(c, s->pos, coef)) return DM_FT_END_EXIT_IMAGE;
    real u[3] = {s->dir[0], s->dir[1], s->dir[2]};
    real amp = DM_FT(ft_peak)(c, coef, u);
    if (!(amp >= (real)c->threshold)) return DM_FT_END_MODEL;
    real dot = u[0] * s->dir[0] + u[1] * s->dir[1] + u[2] * s->dir[2];
    if (dot < 0) {
        for (int i = 0; i < 3; i++) u[i] = -u[i];
        dot = -dot;
    }
    if (dot < (real)c->cos_max_angle) return DM_FT_END_HIGH_CURVATURE;
    real p[3];
    for (int a = 0; a < 3; a++) p[a] = s->pos[a] + (real)c->step * u[a];
    return DM_FT(ft_add_point)(c, s, buf, p, u);
}

/* ---- ACT: how a half ends ---- */

/* A half that ended within sub-cortical grey matter is cut after the weakest of its last
 * sgm_depth points (the smallest FOD amplitude along the streamline there). */
DM_FN void DM_FT(ft_cut_in_sgm)(const dm_ft_ctx *c, DM_FT(state) * s, const real *buf)
{
    int first = s->n - s->sgm_depth, start = (s->half == 1 ? 0 : s->seed_index) + 1;
    if (first < start) first = start;
    int best = -1;
    real best_amp = 0;
    for (int i = first; i < s->n; i++) {
        real d[3], nn = 0, amp;
        for (int k = 0; k < 3; k++) {
            d[k] = buf[3 * i + k] - buf[3 * (i - 1) + k];
            nn += d[k] * d[k];
        }
        if (!(nn > 0)) continue;
        nn = sqrt(nn);
        for (int k = 0; k < 3; k++) d[k] /= nn;
        if (!DM_FT(fod_amp_at)(&c->fod, buf + 3 * i, d, &amp)) continue;
        if (best < 0 || amp < best_amp) {
            best = i;
            best_amp = amp;
        }
    }
    if (best >= 0) s->n = best + 1;
}

/* --backtrack: the half goes back to an earlier point and tracks again from there (its random
 * stream goes on, so the new try differs): by backtrack_step arcs of iFOD2 (aligned on arc
 * starts) or points, 3 tries at each distance before the next; the distance starts again
 * whenever the half gets longer than ever.  0 when going back would reach the seed. */
DM_FN int DM_FT(ft_backtrack)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf)
{
    int seed = s->half == 1 ? 0 : s->seed_index, len = s->n - 1 - seed;
    if (len > s->longest) {
        s->longest = len;
        s->backtrack_step = 1;
        s->backtrack_tries = 0;
    }
    int unit = DM_FT_ALG(c) == DM_FT_IFOD2 ? DM_FT_NS(c) : 1;
    int keep = len / unit * unit - s->backtrack_step * unit;
    if (++s->backtrack_tries == 3) {
        s->backtrack_step++;
        s->backtrack_tries = 0;
    }
    if (keep <= 0) return 0;
    s->n = seed + 1 + keep;
    const real *p = buf + 3 * (s->n - 1), *q = buf + 3 * (s->n - 2);
    real nn = 0;
    for (int k = 0; k < 3; k++) {
        s->pos[k] = p[k];
        s->dir[k] = p[k] - q[k];
        nn += s->dir[k] * s->dir[k];
    }
    if (!(nn > 0)) return 0;
    nn = sqrt(nn);
    for (int k = 0; k < 3; k++) s->dir[k] /= nn;
    s->sgm_depth = 0;
    s->arc = 0;
    s->max_val = 0;
    if (DM_FT_ALG(c) == DM_FT_IFOD2) {
        real f;
        if (!DM_FT(fod_amp_at)(&c->fod, s->pos, s->dir, &f) || !(f > 0)) return 0;
        s->half_prob0 = sqrt(f);
    }
    return 1;
}

/* Under ACT, tckgen's verdict on how a half ended (*t): the model's endings within sub-cortical
 * grey matter become TERM_IN_SGM (and are cut there, as EXIT_SGM), poor endings (CSF, too long,
 * the model giving up in white matter) reject the streamline, or with --backtrack send the half
 * back to try again.  Returns 1 when the half goes on. */
DM_FN int DM_FT(ft_act_end)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf, int *t)
{
    if (s->sgm_depth > 0 && (*t == DM_FT_END_EXIT_IMAGE || *t == DM_FT_END_CALIBRATOR ||
                             *t == DM_FT_END_MODEL || *t == DM_FT_END_HIGH_CURVATURE))
        *t = DM_FT_END_TERM_IN_SGM;
    int poor = 0;
    switch (*t) {
    case DM_FT_END_ENTER_CSF:
    case DM_FT_END_LENGTH_EXCEED: poor = 1; break;
    case DM_FT_END_CALIBRATOR:
    case DM_FT_END_MODEL:
    case DM_FT_END_HIGH_CURVATURE: {
        real tis[5];
        poor = !(DM_FT(ft_tissues)(c, s->pos, tis) && DM_FT(ft_is_path)(tis));
        break;
    }
    case DM_FT_END_EXIT_SGM:
    case DM_FT_END_TERM_IN_SGM: DM_FT(ft_cut_in_sgm)(c, s, buf); break;
    default: break;
    }
    if (!poor) return 0;
    if (c->act.backtrack && DM_FT(ft_backtrack)(c, s, buf)) return 1;
    s->act_rejected = 1;
    return 0;
}

/* --seed-gmwmi: moves p onto the grey side of the grey-white interface (0 <= GM - WM < 0.01,
 * as tckgen's seeds) by Newton steps along the gradient (central differences over 0.001 mm,
 * steps of at most half a voxel of the tissue image, 10 at most), aiming at GM - WM = 0.005; and
 * refuses a point in CSF, in pathology or without white matter.  1 when there.  grad: the last
 * gradient. */
DM_FN int DM_FT(ft_to_interface)(const dm_ft_ctx *c, real p[3], real grad[3])
{
    const real h = (real)0.001, cap = (real)(0.5 * c->act.min_voxel);
    for (int it = 0; it <= 10; it++) {
        real t[5];
        if (!DM_FT(ft_tissues)(c, p, t)) return 0;
        real g = t[DM_FT_CGM] + t[DM_FT_SGM] - t[DM_FT_WM], gn = 0;
        for (int k = 0; k < 3; k++) {
            real a[3] = {p[0], p[1], p[2]}, b[3] = {p[0], p[1], p[2]};
            a[k] += h;
            b[k] -= h;
            grad[k] = (DM_FT(ft_gm_minus_wm)(c, a) - DM_FT(ft_gm_minus_wm)(c, b)) / (2 * h);
            gn += grad[k] * grad[k];
        }
        if (g >= 0 && g < (real)0.01)
            return !DM_FT(ft_is_csf)(t) && !DM_FT(ft_is_path)(t) && t[DM_FT_WM] > 0;
        if (it == 10 || !(gn > 0)) return 0;
        real step = ((real)0.005 - g) / gn, len = fabs(step) * sqrt(gn);
        if (len > cap) step *= cap / len;
        for (int k = 0; k < 3; k++) p[k] += step * grad[k];
    }
    return 0;
}

/* A seed on the grey-white interface: a voxel of the seed image drawn in proportion to its
 * value, a point in it moved onto the interface, then moved within the interface's tangent
 * plane by up to two voxels of the tissue image each way and put back onto it. */
DM_FN int DM_FT(ft_seed_gmwmi)(const dm_ft_ctx *c, DM_FT(state) * s, real p[3])
{
    for (int attempt = 0; attempt < 10000; attempt++) { /* tckgen draws until one works */
        long vox = (long)(DM_FT(ft_uniform)(&s->rng) * (real)c->nseed_vox);
        if (vox >= c->nseed_vox) vox = c->nseed_vox - 1;
        if (DM_FT(ft_uniform)(&s->rng) * (real)c->seed_weight_max > (real)c->seed_weight[vox])
            continue;
        int ijk = c->seed_vox[vox];
        real v[3] = {(real)(ijk % c->seed_nx), (real)((ijk / c->seed_nx) % c->seed_ny),
                     (real)(ijk / c->seed_nx / c->seed_ny)};
        for (int a = 0; a < 3; a++) v[a] += DM_FT(ft_uniform)(&s->rng) - (real)0.5;
        DM_FT(fod_affine)(c->seed_v2w, v, p);
        real grad[3];
        if (!DM_FT(ft_to_interface)(c, p, grad)) continue;
        real gn = sqrt(grad[0] * grad[0] + grad[1] * grad[1] + grad[2] * grad[2]), e1[3], e2[3];
        for (int k = 0; k < 3; k++) grad[k] /= gn;
        DM_FT(ft_frame)(grad, e1, e2);
        real span = (real)(4 * c->act.min_voxel);
        real u1 = (DM_FT(ft_uniform)(&s->rng) - (real)0.5) * span,
             u2 = (DM_FT(ft_uniform)(&s->rng) - (real)0.5) * span;
        for (int k = 0; k < 3; k++) p[k] += u1 * e1[k] + u2 * e2[k];
        if (DM_FT(ft_to_interface)(c, p, grad)) return 1;
    }
    return 0;
}

/* ---- the streamline's life ---- */

/* The seed of streamline id and its initial direction.  1: tracking starts (the seed is point
 * 0 of buf); 0: the seed is rejected (outside --mask, inside an exclusion region, or no
 * direction above the seed cutoff). */
DM_FN int DM_FT(ft_seed)(const dm_ft_ctx *c, unsigned long long id, DM_FT(state) * s, real *buf,
                         real *coef)
{
    dm_rng_init(&s->rng, c->rseed, id);
    s->n = 0;
    s->half = 1;
    s->excluded = 0;
    s->visited = 0;
    s->truncations = 0;
    s->evals = 0;
    s->arc = 0;
    s->max_val = 0;
    s->end1 = s->end2 = DM_FT_END_CONTINUE;
    s->sgm_depth = s->seed_in_sgm = s->reached_wm = s->act_rejected = 0;
    s->backtrack_step = 1;
    s->backtrack_tries = s->longest = 0;
    s->unidirectional = c->unidirectional;
    real p[3];
    if (c->seed_gmwmi) {
        if (!DM_FT(ft_seed_gmwmi)(c, s, p)) return 0;
    } else {
        long vox;
        if (c->seeds_per_voxel > 0) {
            vox = (long)(id / (unsigned long long)c->seeds_per_voxel);
        } else {
            vox = (long)(DM_FT(ft_uniform)(&s->rng) * (real)c->nseed_vox);
            if (vox >= c->nseed_vox) vox = c->nseed_vox - 1;
        }
        int ijk = c->seed_vox[vox];
        real v[3] = {(real)(ijk % c->seed_nx), (real)((ijk / c->seed_nx) % c->seed_ny),
                     (real)(ijk / c->seed_nx / c->seed_ny)};
        for (int a = 0; a < 3; a++) v[a] += DM_FT(ft_uniform)(&s->rng) - (real)0.5;
        DM_FT(fod_affine)(c->seed_v2w, v, p);
    }
    if (c->has_mask && !DM_FT(ft_in_kind)(c, DM_FT_ROI_MASK, p)) return 0;
    if (c->has_exclude && DM_FT(ft_in_kind)(c, DM_FT_ROI_EXCLUDE, p)) return 0;
    int act_one_way = 0;
    if (DM_FT_ACT_ON(
            c)) { /* tckgen's ACT seed: valid tissue, and white matter unless sub-cortical */
        real t[5];
        if (!DM_FT(ft_tissues)(c, p, t)) return 0;
        real gm = t[DM_FT_CGM] + t[DM_FT_SGM];
        s->seed_in_sgm = DM_FT(ft_is_sgm)(t);
        if (!s->seed_in_sgm &&
            (DM_FT(ft_is_csf)(t) || t[DM_FT_WM] == 0 || gm - t[DM_FT_WM] >= (real)0.01))
            return 0;
        /* at the interface, on the grey side: track into the white matter only */
        act_one_way = !s->seed_in_sgm && gm > t[DM_FT_WM] && t[DM_FT_CGM] > t[DM_FT_SGM];
    }
    if (!DM_FT(ft_fod_at)(c, p, coef)) return 0;
    real d[3];
    int found = 0;
    if (DM_FT_ALG(c) == DM_FT_SDSTREAM) {
        DM_FT(ft_random_direction)(&s->rng, d);
        real amp = DM_FT(ft_peak)(c, coef, d);
        found = amp >= (real)c->threshold;
    } else {
        for (int n = 0; n < c->max_seed_attempts && !found; n++) {
            DM_FT(ft_random_direction)(&s->rng, d);
            real f = DM_FT(ft_amp)(c, coef, d);
            if (f > (real)c->init_threshold) {
                found = 1;
                s->seed_half_prob0 = sqrt(f);
            }
        }
    }
    if (!found) return 0;
    if (act_one_way) {
        real a[3], b[3];
        for (int k = 0; k < 3; k++) {
            a[k] = p[k] + (real)0.001 * d[k];
            b[k] = p[k] - (real)0.001 * d[k];
        }
        if (DM_FT(ft_gm_minus_wm)(c, a) > DM_FT(ft_gm_minus_wm)(c, b))
            for (int k = 0; k < 3; k++) d[k] = -d[k];
        s->unidirectional = 1;
    }
    for (int a = 0; a < 3; a++) {
        s->seed_pos[a] = s->pos[a] = buf[a] = p[a];
        s->seed_dir[a] = s->dir[a] = d[a];
    }
    s->n = 1;
    s->half_prob0 = s->seed_half_prob0;
    if (c->include_all) s->visited = DM_FT(ft_include_bits)(c, p);
    return 1;
}

/* One step of the current half; 1 when the half has ended (its termination in end1/end2). */
DM_FN int DM_FT(ft_step)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf, real *coef)
{
    int t = DM_FT_ALG(c) == DM_FT_IFOD2   ? DM_FT(ft_step_ifod2)(c, s, buf)
            : DM_FT_ALG(c) == DM_FT_IFOD1 ? DM_FT(ft_step_ifod1)(c, s, buf, coef)
                                          : DM_FT(ft_step_sdstream)(c, s, buf, coef);
    if (t == DM_FT_END_CONTINUE || t == DM_FT_PENDING) return 0;
    s->arc = 0;
    s->max_val = 0;
    if (DM_FT_ACT_ON(c) && DM_FT(ft_act_end)(c, s, buf, &t)) return 0;
    if (s->half == 1)
        s->end1 = t;
    else
        s->end2 = t;
    return 1;
}

/* After a half has ended: 1 when the second half starts (the first reversed, so that the seed is
 * its last point, and tracking resumes from the seed against the initial direction), 0 when
 * the streamline is complete. */
DM_FN int DM_FT(ft_turn)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf)
{
    (void)c;
    if (s->half != 1 || s->unidirectional || s->excluded || s->act_rejected) {
        s->seed_index = s->half == 1 ? 0 : s->seed_index;
        return 0;
    }
    for (int i = 0, j = s->n - 1; i < j; i++, j--)
        for (int a = 0; a < 3; a++) {
            real t = buf[3 * i + a];
            buf[3 * i + a] = buf[3 * j + a];
            buf[3 * j + a] = t;
        }
    s->seed_index = s->n - 1;
    s->half = 2;
    for (int a = 0; a < 3; a++) {
        s->pos[a] = s->seed_pos[a];
        s->dir[a] = -s->seed_dir[a];
    }
    s->half_prob0 = s->seed_half_prob0;
    s->sgm_depth = 0;
    s->backtrack_step = 1;
    s->backtrack_tries = s->longest = 0;
    return 1; /* when the first half used the whole point budget, the second adds one point */
}

DM_FN real DM_FT(ft_dist)(const real *a, const real *b)
{
    real d0 = a[0] - b[0], d1 = a[1] - b[1], d2 = a[2] - b[2];
    return sqrt(d0 * d0 + d1 * d1 + d2 * d2);
}

DM_FN real DM_FT(ft_length)(const real *buf, int n)
{
    real len = 0;
    for (int i = 1; i < n; i++) len += DM_FT(ft_dist)(buf + 3 * (i - 1), buf + 3 * i);
    return len;
}

/* Cuts the streamline at exactly max_dist mm, as tckgen does without ACT: walking from point 0,
 * at the first segment that passes max_dist either stop inside it (past the seed), or (not yet
 * past the seed: the stored-first half alone is too long) keep that half only, turned to start
 * at the seed, and walk again. */
DM_FN void DM_FT(ft_truncate)(const dm_ft_ctx *c, real *buf, int *n, int *seed_index)
{
    const real max_dist = (real)c->max_dist;
    for (;;) {
        real len = 0;
        int i = 1;
        for (; i < *n; i++) {
            real seg = DM_FT(ft_dist)(buf + 3 * (i - 1), buf + 3 * i);
            if (len + seg > max_dist) break;
            len += seg;
        }
        if (i >= *n) return;
        if (i <= *seed_index) {
            *n = *seed_index + 1;
            for (int a = 0, b = *n - 1; a < b; a++, b--)
                for (int k = 0; k < 3; k++) {
                    real t = buf[3 * a + k];
                    buf[3 * a + k] = buf[3 * b + k];
                    buf[3 * b + k] = t;
                }
            *seed_index = 0;
            continue;
        }
        real seg = DM_FT(ft_dist)(buf + 3 * (i - 1), buf + 3 * i);
        real f = (max_dist - len) / seg;
        for (int k = 0; k < 3; k++)
            buf[3 * i + k] = buf[3 * (i - 1) + k] + f * (buf[3 * i + k] - buf[3 * (i - 1) + k]);
        *n = i + 1;
        return;
    }
}

/* tckgen's verdict on a complete streamline, and its final points (in buf, *n of them, the seed
 * at *seed_index).  Returns DM_FT_ACCEPTED or the reason of the rejection. */
DM_FN int DM_FT(ft_finish)(const dm_ft_ctx *c, DM_FT(state) * s, real *buf, int *n_out,
                           int *seed_out)
{
    int n = s->n, seed = s->seed_index;
    if (s->excluded) return DM_FT_REJECT_EXCLUDE;
    if (s->act_rejected) return DM_FT_REJECT_ACT;
    if (s->seed_in_sgm && !s->reached_wm) return DM_FT_REJECT_ACT_SGM;
    if (n <= 1) return DM_FT_REJECT_NO_PROPAGATION;
    if (n < c->min_pts_pre) return DM_FT_REJECT_TOO_SHORT;
    if (c->include_all && s->visited != c->include_all) return DM_FT_REJECT_MISSED_INCLUDE;
    const int r = c->downsample;
    if (r > 1 || c->act.crop_at_gmwmi) {
        if (n > 2) {
            int m = 1, new_seed = seed == 0 ? 0 : -1;
            int k = seed == 0 ? r : (seed - 1) % r + 1;
            for (; k < n - 1; k += r) {
                if (k == seed) new_seed = m;
                for (int a = 0; a < 3; a++) buf[3 * m + a] = buf[3 * k + a];
                m++;
            }
            if (seed == n - 1) new_seed = m;
            for (int a = 0; a < 3; a++) buf[3 * m + a] = buf[3 * (n - 1) + a];
            n = m + 1;
            seed = new_seed;
        }
        if (!(n > c->min_pts_post && n < c->max_pts_post)) {
            real len = DM_FT(ft_length)(buf, n);
            if (len < (real)c->min_dist) return DM_FT_REJECT_TOO_SHORT;
            if (len > (real)c->max_dist) {
                if (DM_FT_ACT_ON(c)) return DM_FT_REJECT_TOO_LONG; /* ACT rejects, never cuts */
                DM_FT(ft_truncate)(c, buf, &n, &seed);
            }
        }
    }
    *n_out = n;
    *seed_out = seed;
    return DM_FT_ACCEPTED;
}

/* Streamline id traced to its end in one go (the host's way): its verdict, and when accepted
 * its points in buf (*n of them, the seed at *seed_index). */
DM_FN int DM_FT(ft_trace)(const dm_ft_ctx *c, unsigned long long id, DM_FT(state) * s, real *buf,
                          real *coef, int *n, int *seed_index)
{
    if (!DM_FT(ft_seed)(c, id, s, buf, coef)) return DM_FT_REJECT_SEED;
    for (;;) {
        if (DM_FT(ft_step)(c, s, buf, coef) && !DM_FT(ft_turn)(c, s, buf)) break;
    }
    return DM_FT(ft_finish)(c, s, buf, n, seed_index);
}
