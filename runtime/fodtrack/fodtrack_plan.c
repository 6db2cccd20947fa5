#include "fodtrack/fodtrack_plan.h"

#include "util/error.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double deg = 3.14159265358979323846 / 180;

static void copy_3x4(const dm_affine *a, double m[3][4])
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) m[i][j] = a->m[i][j];
}

/* A mask as tckgen reads it: a voxel is in when its value rounds to non-zero (|v| >= 0.5). */
static int in_mask(double v)
{
    return isfinite(v) && fabs(v) >= 0.5;
}

/* The voxels of an image's grid (the kernel indexes them x + nx (y + ny z)). */
static size_t view_voxels(const dm_image_view *v)
{
    return v->shape[0] * v->shape[1] * v->shape[2];
}

/* Appends the region image v of `kind` to the plan. */
static int add_roi(dm_ft_plan *p, const dm_image_view *v, int kind, const char *what)
{
    dm_ft_ctx *c = &p->ctx;
    if (c->nroi == DM_FT_MAX_ROI)
        return dm_set_error("track: at most %d --include, --exclude and --mask images together",
                            DM_FT_MAX_ROI);
    if (dm_view_nt(v) != 1)
        return dm_set_error("%s: a %s image must be 3D (it has %zu volumes)", v->name, what,
                            dm_view_nt(v));
    dm_ft_roi *r = &c->roi[c->nroi];
    r->nx = (int)v->shape[0];
    r->ny = (int)v->shape[1];
    r->nz = (int)v->shape[2];
    r->kind = kind;
    r->offset = p->roi_bytes;
    dm_affine w2v;
    if (dm_affine_invert(&v->v2w, &w2v) != 0)
        return dm_set_error("%s: the voxel -> world matrix is singular", v->name);
    copy_3x4(&w2v, r->w2v);
    size_t n = view_voxels(v);
    unsigned char *grown = realloc(p->roi_data, p->roi_bytes + n + 1);
    if (!grown) return dm_set_error("%s: out of memory", v->name);
    p->roi_data = grown;
    long inside = 0;
    unsigned char *dst = p->roi_data + p->roi_bytes;
    for (size_t z = 0; z < v->shape[2]; z++)
        for (size_t y = 0; y < v->shape[1]; y++)
            for (size_t x = 0; x < v->shape[0]; x++) inside += *dst++ = in_mask(dm_view_at(v, x, y, z, 0));
    p->roi_bytes += n;
    if (!inside) return dm_set_error("%s: the %s image has no voxel >= 0.5", v->name, what);
    if (kind == DM_FT_ROI_INCLUDE) {
        int bit = 0;
        while (c->include_all >> bit & 1u) bit++;
        r->include_bit = bit;
        c->include_all |= 1u << bit;
    }
    if (kind == DM_FT_ROI_MASK) c->has_mask = 1;
    if (kind == DM_FT_ROI_EXCLUDE) c->has_exclude = 1;
    c->nroi++;
    size_t len = p->roi_lines ? strlen(p->roi_lines) : 0;
    char *lines = realloc(p->roi_lines, len + strlen(v->name) + 32);
    if (!lines) return dm_set_error("%s: out of memory", v->name);
    p->roi_lines = lines;
    sprintf(p->roi_lines + len, "roi: %s %s\n",
            kind == DM_FT_ROI_INCLUDE   ? "include"
            : kind == DM_FT_ROI_EXCLUDE ? "exclude"
                                        : "mask",
            v->name);
    return 0;
}

static int add_rois(dm_ft_plan *p, const dm_image_view *list, int n, int kind, const char *what)
{
    for (int i = 0; i < n; i++)
        if (add_roi(p, &list[i], kind, what) != 0) return -1;
    return 0;
}

/* --act: the five-tissue image (cortical GM, sub-cortical GM, WM, CSF, pathology), voxel-major. */
static int load_act(dm_ft_plan *p, const dm_image_view *v)
{
    if (dm_view_nt(v) != 5)
        return dm_set_error("%s: an ACT image has 5 volumes (cortical GM, sub-cortical GM, WM, "
                            "CSF, pathology), not %zu",
                            v->name, dm_view_nt(v));
    size_t n = view_voxels(v);
    p->tissue = malloc(5 * (n ? n : 1) * sizeof *p->tissue);
    if (!p->tissue) return dm_set_error("%s: out of memory", v->name);
    size_t i = 0;
    for (size_t z = 0; z < v->shape[2]; z++)
        for (size_t y = 0; y < v->shape[1]; y++)
            for (size_t x = 0; x < v->shape[0]; x++, i++)
                for (int k = 0; k < 5; k++) p->tissue[5 * i + k] = (float)dm_view_at(v, x, y, z, k);
    dm_ft_act *a = &p->ctx.act;
    a->on = 1;
    a->nx = (int)v->shape[0];
    a->ny = (int)v->shape[1];
    a->nz = (int)v->shape[2];
    a->tissue = p->tissue;
    dm_affine w2v;
    int bad = dm_affine_invert(&v->v2w, &w2v) != 0;
    copy_3x4(&w2v, a->w2v);
    a->min_voxel = fmin(v->voxel[0], fmin(v->voxel[1], v->voxel[2]));
    return bad ? dm_set_error("%s: the voxel -> world matrix is singular", v->name) : 0;
}

/* Widens the box [lo, hi] to hold the cube of voxel x (its centre, in voxel coordinates) of an
 * image with voxel -> world matrix a. */
static void box_add(const dm_affine *a, const double x[3], double lo[3], double hi[3])
{
    double c[3];
    dm_affine_apply(a, x, c);
    for (int r = 0; r < 3; r++) {
        double half = 0.5 * (fabs(a->m[r][0]) + fabs(a->m[r][1]) + fabs(a->m[r][2]));
        lo[r] = fmin(lo[r], c[r] - half);
        hi[r] = fmax(hi[r], c[r] + half);
    }
}

static void voxel_of(long i, int nx, int ny, double x[3])
{
    x[0] = (double)(i % nx);
    x[1] = (double)(i / nx % ny);
    x[2] = (double)(i / nx / ny);
}

/* tckgen tries every seed and ends with no streamline when none lies in the FOD image: refuse a
 * seed image none of whose seed voxels (cubes) meets the FOD image's voxels (cubes), before any
 * tracking.  The test runs in the FOD's voxel coordinates, cube by cube. */
static int check_seeds_overlap(const dm_ft_plan *p, const dm_affine *seed_v2w, int nx, int ny,
                               const char *seed_path, const char *fod_path)
{
    const dm_ft_fod *f = &p->fod;
    const dm_affine m = dm_affine_mul(&f->w2v, seed_v2w); /* seed voxel -> FOD voxel */
    const double n[3] = {f->nx, f->ny, f->nz};
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (long k = 0; k < p->ctx.nseed_vox; k++) {
        double x[3];
        voxel_of(p->seed_vox[k], nx, ny, x);
        /* the seed cube's box in FOD voxel coordinates, against the FOD's [-0.5, n - 0.5] */
        double a[3] = {INFINITY, INFINITY, INFINITY}, b[3] = {-INFINITY, -INFINITY, -INFINITY};
        box_add(&m, x, a, b);
        if (a[0] < n[0] - 0.5 && b[0] > -0.5 && a[1] < n[1] - 0.5 && b[1] > -0.5 &&
            a[2] < n[2] - 0.5 && b[2] > -0.5)
            return 0;
        box_add(seed_v2w, x, lo, hi);
    }
    double flo[3] = {INFINITY, INFINITY, INFINITY}, fhi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int k = 0; k < 8; k++) {
        double x[3] = {k & 1 ? f->nx - 1 : 0, k & 2 ? f->ny - 1 : 0, k & 4 ? f->nz - 1 : 0};
        box_add(&f->v2w, x, flo, fhi);
    }
    return dm_set_error("%s: the seed image does not overlap the FOD image %s: its seeds lie in "
                        "x %.1f..%.1f, y %.1f..%.1f, z %.1f..%.1f mm, the FOD image in "
                        "x %.1f..%.1f, y %.1f..%.1f, z %.1f..%.1f mm (world coordinates)",
                        seed_path, fod_path, lo[0], hi[0], lo[1], hi[1], lo[2], hi[2], flo[0],
                        fhi[0], flo[1], fhi[1], flo[2], fhi[2]);
}

static int load_seeds(dm_ft_plan *p, const dm_image_view *v, const char *fod_name)
{
    if (dm_view_nt(v) != 1)
        return dm_set_error("%s: the seed image must be 3D (it has %zu volumes)", v->name,
                            dm_view_nt(v));
    size_t n = view_voxels(v);
    p->seed_vox = malloc((n ? n : 1) * sizeof *p->seed_vox);
    p->seed_weight = malloc((n ? n : 1) * sizeof *p->seed_weight);
    if (!p->seed_vox || !p->seed_weight) return dm_set_error("%s: out of memory", v->name);
    long k = 0;
    float wmax = 0;
    size_t i = 0;
    for (size_t z = 0; z < v->shape[2]; z++)
        for (size_t y = 0; y < v->shape[1]; y++)
            for (size_t x = 0; x < v->shape[0]; x++, i++) {
                /* interface seeds: every voxel above 0, weighted by its value (tckgen's
                 * rejection seeding); mask seeds: voxels >= 0.5 */
                double value = dm_view_at(v, x, y, z, 0);
                int in = p->ctx.seed_gmwmi ? value > 0 && isfinite(value) : in_mask(value);
                if (!in) continue;
                p->seed_weight[k] = (float)value;
                if (p->seed_weight[k] > wmax) wmax = p->seed_weight[k];
                p->seed_vox[k++] = (int)i;
            }
    p->ctx.seed_weight = p->seed_weight;
    p->ctx.seed_weight_max = wmax;
    copy_3x4(&v->v2w, p->ctx.seed_v2w);
    p->ctx.seed_nx = (int)v->shape[0];
    p->ctx.seed_ny = (int)v->shape[1];
    p->ctx.seed_vox = p->seed_vox;
    p->ctx.nseed_vox = k;
    if (k == 0) return dm_set_error("%s: the seed image has no voxel >= 0.5", v->name);
    return check_seeds_overlap(p, &v->v2w, (int)v->shape[0], (int)v->shape[1], v->name,
                               fod_name);
}

/* tckgen's point budgets (MRtrix's set_num_points), in float as it computes them: the points
 * a streamline may have while tracking, and the counts outside which the downsampled output's
 * exact length must be checked. */
static void point_budgets(dm_ft_plan *p, double angle)
{
    dm_ft_ctx *c = &p->ctx;
    float step = (float)c->step, min_dist = (float)c->min_dist, max_dist = (float)c->max_dist;
    float r = (float)c->downsample, nsub = c->algorithm == DM_FT_IFOD2 ? (float)c->nsub : 1.0f;
    float min_radius = step / (2.0f * sinf((float)angle / 2.0f));
    float ang_pre = 2.0f * asinf(step / (2.0f * min_radius)) / nsub;
    float ang_post = r * ang_pre;
    float dmin_post =
        ang_post > 2.0f * 3.14159265f ? 0.0f : 2.0f * min_radius * sinf(ang_post / 2.0f);
    float dmax_post = r * step / nsub;
    c->min_pts_pre = 1 + (int)ceilf(min_dist / step);
    c->max_pts_pre = dmin_post > 0 ? 3 + (int)ceilf(r * max_dist / dmin_post) : 1 << 30;
    c->min_pts_post = dmin_post > 0 ? 3 + (int)ceilf(min_dist / dmin_post) : 3;
    c->max_pts_post = 1 + (int)floorf(max_dist / dmax_post);
}

int dm_ft_plan_build(const dm_fodtrack_options *o, const dm_ft_inputs *in, dm_ft_plan *p)
{
    memset(p, 0, sizeof *p);
    dm_ft_ctx *c = &p->ctx;
    if (!strcmp(o->algorithm, "ifod2")) {
        c->algorithm = DM_FT_IFOD2;
        p->method = "iFOD2";
    } else if (!strcmp(o->algorithm, "ifod1")) {
        c->algorithm = DM_FT_IFOD1;
        p->method = "iFOD1";
    } else if (!strcmp(o->algorithm, "sd_stream")) {
        c->algorithm = DM_FT_SDSTREAM;
        p->method = "SD_STREAM";
    } else {
        return dm_set_error("track: --algorithm must be ifod2, ifod1 or sd_stream, not '%s'",
                            o->algorithm);
    }
    p->fod_name = in->fod.name;
    p->seed_name = in->seed.name;
    p->act_name = in->act.data ? in->act.name : NULL;
    if (dm_ft_fod_from(&in->fod, &p->fod) != 0) return -1;
    const double *vs = p->fod.voxel;
    p->vox = cbrt(vs[0] * vs[1] * vs[2]);
    dm_ft_fod_field(&p->fod, &c->fod);
    if (p->fod.nrows == 0) return dm_set_error("%s: every voxel's FOD is zero", in->fod.name);

    /* tckgen's defaults, in units of the voxel size */
    const int ifod2 = c->algorithm == DM_FT_IFOD2;
    double step_vox = ifod2 ? 0.5 : 0.1, angle_deg = ifod2                         ? 45
                                                     : c->algorithm == DM_FT_IFOD1 ? 15
                                                                                   : 60;
    c->step = isnan(o->step) ? step_vox * p->vox : o->step;
    double angle = (isnan(o->angle) ? angle_deg : o->angle) * deg;
    c->cos_max_angle = cos(angle);
    /* under ACT tckgen halves the default cutoff and shortens the minimum length (streamlines
     * end at the grey matter, not where the FOD fades) */
    const int act = in->act.data != NULL;
    c->threshold = isnan(o->cutoff) ? (act ? 0.05 : 0.1) : o->cutoff;
    c->init_threshold = isnan(o->seed_cutoff) ? c->threshold : o->seed_cutoff;
    c->min_dist = isnan(o->min_length) ? (act ? 2 : 5) * p->vox : o->min_length;
    c->max_dist = isnan(o->max_length) ? 100 * p->vox : o->max_length;
    int samples = o->samples > 0 ? (int)o->samples : 4;
    c->nsub = samples - 1;
    c->power = isnan(o->power) ? (ifod2 ? 1.0 / samples : 1.0) : o->power;
    c->power_kind = c->power == 1      ? DM_FT_POWER_ONE
                    : c->power == 0.5  ? DM_FT_POWER_HALF
                    : c->power == 0.25 ? DM_FT_POWER_QUARTER
                                       : DM_FT_POWER_OTHER;
    c->max_trials = o->trials > 0 ? (int)o->trials : 1000;
    c->max_seed_attempts = o->max_attempts > 0 ? (int)o->max_attempts : 1000;
    c->unidirectional = o->unidirectional;
    c->downsample = ifod2 ? c->nsub : 1;
    if (!(c->step > 0)) return dm_set_error("track: --step must be positive");
    if (!(angle > 0 && angle <= 90 * deg))
        return dm_set_error("track: --angle must be in (0, 90] degrees");
    if (!(c->min_dist >= 0 && c->max_dist > c->min_dist))
        return dm_set_error("track: --max-length must exceed --min-length (%g, %g mm)", c->min_dist,
                            c->max_dist);
    if (c->nsub < 1 || c->nsub > DM_FT_MAX_SUB)
        return dm_set_error("track: --samples must be 2 to %d", DM_FT_MAX_SUB + 1);
    if (!(c->power > 0)) return dm_set_error("track: --power must be positive");
    point_budgets(p, angle);

    if (c->algorithm != DM_FT_SDSTREAM) {
        if (dm_ft_calibrate(ifod2, p->fod.lmax, angle, c->step, p->vox, c->nsub, c->power,
                            &p->calib) != 0)
            return -1;
        c->calib = p->calib.dirs;
        c->ncalib = p->calib.n;
        c->calib_ratio = p->calib.ratio;
    }

    if (act && load_act(p, &in->act) != 0) return -1;
    if ((o->backtrack || o->crop_at_gmwmi || in->seed_gmwmi) && !act)
        return dm_set_error("track: --%s needs --act", o->backtrack       ? "backtrack"
                                                       : o->crop_at_gmwmi ? "crop-at-gmwmi"
                                                                          : "seed-gmwmi");
    if (o->backtrack && c->algorithm == DM_FT_SDSTREAM)
        return dm_set_error("track: --backtrack works with ifod1 and ifod2, not sd_stream");
    if (o->backtrack && o->stop) return dm_set_error("track: --backtrack cannot go with --stop");
    c->act.backtrack = o->backtrack;
    c->act.crop_at_gmwmi = o->crop_at_gmwmi;
    c->seed_gmwmi = in->seed_gmwmi;
    if (load_seeds(p, &in->seed, in->fod.name) != 0) return -1;
    if (add_rois(p, in->include, in->ninclude, DM_FT_ROI_INCLUDE, "--include") != 0 ||
        add_rois(p, in->exclude, in->nexclude, DM_FT_ROI_EXCLUDE, "--exclude") != 0 ||
        add_rois(p, in->mask, in->nmask, DM_FT_ROI_MASK, "--mask") != 0)
        return -1;
    c->roi_data = p->roi_data;
    c->stop_on_include = o->stop && c->include_all;
    if (o->stop && !c->include_all) dm_warn("track: --stop does nothing without --include");

    /* how many: tckgen's select / seeds rules */
    if (o->seeds_per_voxel > 0) {
        c->seeds_per_voxel = o->seeds_per_voxel;
        p->max_seeds = (unsigned long long)o->seeds_per_voxel * (unsigned long long)c->nseed_vox;
        p->select = p->max_seeds;
    } else {
        long select = o->select >= 0 ? o->select : (o->seeds >= 0 ? 0 : 5000);
        p->select = (unsigned long long)select;
        p->max_seeds =
            o->seeds >= 0 ? (unsigned long long)o->seeds : 1000ULL * (unsigned long long)select;
        if (p->select == 0 && p->max_seeds == 0)
            return dm_set_error("track: --select 0 needs --seeds N (or the run would not end)");
    }
    p->id_end = p->max_seeds ? p->max_seeds : ULLONG_MAX;
    if (o->part.n > 0) {
        /* a share of the seed ids: each streamline's random stream is keyed by its id, so the
         * parts trace the whole run's streamlines; --select depends on every earlier seed's
         * verdict, so a part needs a count of seeds fixed in advance */
        if (o->seeds_per_voxel <= 0 && (o->select > 0 || o->seeds <= 0))
            return dm_set_error("track: --part needs a fixed seed count: --seeds N (or "
                                "--seed-random-per-voxel), and no --select");
        size_t first, end;
        dm_part_range(&o->part, (size_t)p->max_seeds, &first, &end);
        p->id_first = first;
        p->id_end = end;
    }
    c->rseed = o->rseed;
    /* the buffer holds every point before downsampling, and the one the second half may add
     * after the first used the budget */
    p->buf_points = c->max_pts_pre + c->nsub + 2;
    return 0;
}

char *dm_ft_plan_header(const dm_ft_plan *p, const dm_fodtrack_options *o)
{
    const dm_ft_ctx *c = &p->ctx;
    const char *act = p->act_name;
    size_t cap = 4096 + (p->roi_lines ? strlen(p->roi_lines) : 0) +
                 (o->history ? strlen(o->history) : 0) + strlen(p->fod_name) +
                 strlen(p->seed_name) + (act ? strlen(act) : 0);
    char *h = malloc(cap);
    if (!h) return NULL;
    int n =
        snprintf(h, cap,
                 "command_history: %s\nmethod: %s\nsource: %s\nstep_size: %g\n"
                 "max_angle: %g\nthreshold: %g\ninit_threshold: %g\nmin_dist: %g\n"
                 "max_dist: %g\nfod_power: %g\nmax_trials: %d\nmax_seed_attempts: %d\n"
                 "samples_per_step: %d\ndownsample_factor: %d\nlmax: %d\n"
                 "unidirectional: %d\nstop_on_all_include: %d\nrk4: 0\n"
                 "max_num_seeds: %llu\nmax_num_tracks: %llu\nrng_seed: %llu\n"
                 "roi: seed %s\n%s%s%s%s%s",
                 o->history ? o->history : "dimoc track", p->method, p->fod_name, c->step,
                 acos(c->cos_max_angle) / deg, c->threshold, c->init_threshold, c->min_dist,
                 c->max_dist, c->power, c->max_trials, c->max_seed_attempts, c->nsub + 1,
                 c->downsample, p->fod.lmax, c->unidirectional, c->stop_on_include, p->max_seeds,
                 p->select, (unsigned long long)c->rseed, p->seed_name,
                 p->roi_lines ? p->roi_lines : "", act ? "act: " : "", act ? act : "",
                 act ? (o->backtrack ? "\nbacktrack: 1" : "\nbacktrack: 0") : "",
                 act && o->crop_at_gmwmi ? "\ncrop_at_gmwmi: 1\n" : "\n");
    if (n > 0 && h[n - 1] == '\n') h[n - 1] = 0;
    return h;
}

void dm_ft_plan_free(dm_ft_plan *p)
{
    dm_ft_fod_free(&p->fod);
    dm_ft_calibration_free(&p->calib);
    free(p->seed_vox);
    free(p->seed_weight);
    free(p->tissue);
    free(p->roi_data);
    free(p->roi_lines);
    memset(p, 0, sizeof *p);
}
