/* The GPU tracker's per-streamline code (templates/track/track_gpu_gather.h), run serially on the
 * host, gives exactly the CPU path's outputs (runtime/track/track_run.c): fdt_paths,
 * seeds_to_targets, waytotal, half-streamline ends and matrices 1, 2, 3, on a random 2-fibre
 * field with loop check, a stop mask, an --avoid surface (a tilted mesh over part of the field)
 * and tiny key buffers that force the overflow re-runs the GPU host code does.  What this
 * cannot check is CUDA itself (see tests/gpu/test_track_gpu.py). */
#include "util/error.h"
#include "track/track_gpu_host.h"
#include "track/track_run.h"
#include "track/track_surface.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NX = 16, NY = 12, NZ = 6, NS = 8, NF = 2, NSEED = 40, PER = 30, NT = 3 };
#define NV (NX * NY * NZ)

static int same_sparse(const dm_sparse *a, const dm_sparse *b)
{
    return a->n == b->n && !memcmp(a->keys, b->keys, a->n * 8) &&
           !memcmp(a->counts, b->counts, a->n * 8);
}

int main(void)
{
    srand(7);
    dm_track_field f;
    memset(&f, 0, sizeof f);
    f.nx = NX, f.ny = NY, f.nz = NZ, f.nsamples = NS, f.nfibres = NF;
    f.vox[0] = f.vox[1] = f.vox[2] = 1;
    f.dirs = malloc(sizeof(float) * 3 * NV * NS * NF);
    f.fracs = malloc(sizeof(float) * NV * NS * NF);
    f.brain = malloc(NV);
    for (int v = 0; v < NV; v++) {
        int i = v % NX, k = v / (NX * NY);
        f.brain[v] = i > 0 && k < NZ - 1;
        for (int s = 0; s < NS * NF; s++) {
            float d[3] = {rand() / (float)RAND_MAX - 0.5f, rand() / (float)RAND_MAX - 0.5f,
                          0.3f * (rand() / (float)RAND_MAX - 0.5f)};
            d[s % 2] += 1.5f; /* fibre 1 mostly along x, fibre 2 along y */
            float n = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            for (int a = 0; a < 3; a++) f.dirs[3 * (v * NS * NF + s) + a] = d[a] / n;
            f.fracs[v * NS * NF + s] = 0.2f + 0.3f * (rand() / (float)RAND_MAX);
        }
    }
    dm_track_seeds sd;
    memset(&sd, 0, sizeof sd);
    sd.n = NSEED;
    sd.ref.nx = NX, sd.ref.ny = NY, sd.ref.nz = NZ;
    dm_affine_identity(&sd.track2seed);
    sd.pos = malloc(sizeof(float) * 3 * NSEED);
    sd.svox = malloc(sizeof(int) * NSEED);
    for (int k = 0; k < NSEED; k++) {
        int i = 2 + k % 12, j = 1 + (k / 12) * 3, z = 2;
        sd.pos[3 * k] = i, sd.pos[3 * k + 1] = j, sd.pos[3 * k + 2] = z;
        sd.svox[k] = (z * NY + j) * NX + i;
    }
    dm_track_masks m;
    memset(&m, 0, sizeof m);
    for (int b = 0; b < DM_TRACK_MAX_SURFACES; b++) m.surf_target[b] = -1;
    m.nvox = NV;
    m.flags = calloc(NV, 1);
    for (int j = 0; j < NY; j++) m.flags[(2 * NY + j) * NX + NX - 2] = DM_TRACK_FLAG_STOP;
    m.seed_col = malloc(sizeof(int) * NV);
    m.t2_col = malloc(sizeof(int) * NV);
    m.t3_node = malloc(sizeof(int) * NV);
    m.target_off = malloc(sizeof(int) * (NV + 1));
    m.target_ids = malloc(sizeof(int) * NV * NT);
    m.ntargets = NT;
    int nt = 0;
    for (int v = 0; v < NV; v++) {
        m.seed_col[v] = m.t2_col[v] = m.t3_node[v] = -1;
        m.target_off[v] = nt;
        for (int t = 0; t < NT; t++)
            if ((v % NX) % (t + 3) == 0) m.target_ids[nt++] = t;
        m.t2_col[v] = (v % NX) / 2; /* several voxels share a column */
        if (v % 7 == 0) m.t3_node[v] = v / 7 % 50;
    }
    m.target_off[NV] = nt;
    for (int k = NSEED - 1; k >= 0; k--) m.seed_col[sd.svox[k]] = k;
    m.n2 = NX / 2;
    m.n3 = 50;
    /* the avoid surface: a 3 x 3 vertex grid at x = 8.3 + 0.2 y, over y and z in [-0.5, 5.5]
     * (tracking mm = voxels here), so that some streamlines cross it and others pass beside */
    double xyz[27];
    int tri[24], ntri = 0;
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++) {
            double y = -0.5 + 3 * a, z = -0.5 + 3 * c;
            xyz[3 * (3 * a + c)] = 8.3 + 0.2 * y, xyz[3 * (3 * a + c) + 1] = y,
                             xyz[3 * (3 * a + c) + 2] = z;
        }
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 2; c++) {
            int i = 3 * a + c, quad[6] = {i, i + 3, i + 1, i + 1, i + 3, i + 4};
            memcpy(tri + 3 * ntri, quad, sizeof quad);
            ntri += 2;
        }
    dm_mesh mesh = {9, ntri, xyz, tri};
    dm_affine identity;
    dm_affine_identity(&identity);
    if (dm_track_surface_build(&mesh, &identity, "test surface", &m.surfaces) != 0) {
        printf("FAIL track_gpu_gather_surface: %s\n", dm_last_error());
        return 1;
    }
    dm_track_options o;
    memset(&o, 0, sizeof o);
    o.per_seed = PER, o.nsteps = 200, o.steplength = 0.5, o.cthr = 0.2, o.fibthresh = 0.01;
    o.fibst = 1, o.loopcheck = 1, o.rseed = 99, o.threads = 2;
    o.opd = o.os2t = o.matrix1 = o.matrix2 = o.matrix3 = 1;
    dm_track_result cpu;
    if (dm_track_run(&f, &sd, &m, &o, &cpu) != 0) {
        printf("FAIL track_gpu_gather_cpu_run: CPU run failed\n");
        return 1;
    }

    /* the GPU code, one "thread", key buffers of 64 entries (matrix 3 needs at most
     * 50 * 49 / 2 for one streamline: that one gets the room it needs) */
    dm_track_ctx c;
    dm_track_ctx_init(&f, &sd, &m, &o, &c);
    int L = 2 * (c.half_steps + 1), lcap = 64;
    while (lcap < L) lcap *= 2;
    int *a = malloc(sizeof(int) * L), *b = malloc(sizeof(int) * L), bits = 6;
    while ((1 << bits) < 2 * L) bits++;
    int *set = malloc(sizeof(int) << bits);
    for (int i = 0; i < 1 << bits; i++) set[i] = -1;
    dm_track_gpu_scratch scr = {a, b, set, L, L, bits, NULL, NULL, NULL, 0};
    dm_track_loop loop = {malloc(sizeof(int) * lcap), malloc(sizeof(float) * 3 * lcap),
                          malloc(sizeof(int) * lcap), lcap, 0};
    for (int i = 0; i < lcap; i++) loop.keys[i] = -1;
    unsigned long long total = NSEED * PER, caps[3] = {64, 64, 1225 + 64};
    dm_track_gpu_out g;
    memset(&g, 0, sizeof g);
    g.seed_pos = sd.pos, g.seed_svox = sd.svox, g.per_seed = PER;
    g.seed_col = m.seed_col, g.t2_col = m.t2_col, g.t3_node = m.t3_node;
    g.target_off = m.target_off, g.target_ids = m.target_ids, g.ntargets = NT, g.nvox = NV;
    for (int b = 0; b < DM_TRACK_MAX_SURFACES; b++) g.surf_target[b] = -1;
    g.paths = calloc(NV, 4);
    g.seeds_to_targets = calloc(NV * NT, 4);
    unsigned long long stats[DM_TG_NSTATS] = {0}, nkeys[3], nover[3], *ids[3];
    g.stats = stats, g.nkeys = nkeys, g.noverflow = nover;
    for (int j = 0; j < 3; j++) {
        g.keys[j] = malloc(8 * caps[j]);
        g.key_cap[j] = caps[j];
        g.overflow[j] = malloc(8 * total);
        ids[j] = malloc(8 * total);
    }
    dm_sparse mat[3];
    long reruns = 0;
    for (int j = 0; j < 3; j++) dm_sparse_init(&mat[j]);
    const int batch = 97; /* streamlines per "launch" */
    for (unsigned long long first = 0; first < total; first += batch) {
        unsigned long long n = total - first < batch ? total - first : batch, nids[3] = {0, 0, 0};
        int what = DM_TG_COUNTS | DM_TG_M1 | DM_TG_M2 | DM_TG_M3, pass_mat = -1;
        for (;;) { /* one launch, then the re-runs of one matrix at a time */
            memset(nkeys, 0, sizeof nkeys);
            memset(nover, 0, sizeof nover);
            unsigned long long next = 0; /* the launch's shared counter, one thread */
            dm_tg_thread(&c, &g, &scr, &loop, pass_mat < 0 ? first : 0, n,
                         pass_mat < 0 ? NULL : ids[pass_mat], what, &next, 1, 0, 1, stats);
            for (int j = 0; j < 3; j++) {
                if (pass_mat >= 0 && j != pass_mat) continue;
                unsigned long long nk = nkeys[j] < caps[j] ? nkeys[j] : caps[j];
                dm_sparse_add_keys(&mat[j], g.keys[j],
                                   nk); /* as runtime/track/track_gpu.c drains */
                memcpy(ids[j], g.overflow[j], 8 * nover[j]);
                nids[j] = nover[j];
            }
            pass_mat = nids[0] ? 0 : nids[1] ? 1 : nids[2] ? 2 : -1;
            if (pass_mat < 0) break;
            n = nids[pass_mat];
            what = DM_TG_M1 << pass_mat;
            reruns += (long)n;
        }
    }
    for (int j = 0; j < 3; j++) dm_sparse_compact(&mat[j]);
    int ends_same = 1;
    for (int e = 0; e < 6; e++) ends_same &= stats[2 + e] == cpu.ends[e];
    int ok = stats[0] == cpu.waytotal && stats[1] == cpu.steps && ends_same;
    printf("%s track_gpu_gather_counts: waytotal %llu/%llu, points %llu/%llu, ends same %d\n",
           ok ? "PASS" : "FAIL", stats[0], cpu.waytotal, stats[1], cpu.steps, ends_same);
    /* the surface must matter for the comparison to cover it: some halves end on it, not all */
    unsigned long long avoided = stats[2 + DM_TRACK_END_AVOID];
    ok = avoided == cpu.ends[DM_TRACK_END_AVOID] && avoided > 0 && stats[0] > 0;
    printf("%s track_gpu_gather_surface_avoid: %llu/%llu half-streamlines end at the surface, "
           "%llu kept\n",
           ok ? "PASS" : "FAIL", avoided, cpu.ends[DM_TRACK_END_AVOID], stats[0]);
    ok = !memcmp(g.paths, cpu.paths, 4 * NV) &&
         !memcmp(g.seeds_to_targets, cpu.seeds_to_targets, 4 * NV * NT);
    unsigned long long psum = 0;
    for (int v = 0; v < NV; v++) psum += cpu.paths[v];
    printf("%s track_gpu_gather_paths_targets: identical to the CPU (%llu path counts)\n",
           ok ? "PASS" : "FAIL", psum);
    ok = same_sparse(&mat[0], &cpu.m1) && same_sparse(&mat[1], &cpu.m2) &&
         same_sparse(&mat[2], &cpu.m3);
    printf(
        "%s track_gpu_gather_matrices: %zu/%zu, %zu/%zu, %zu/%zu entries, %ld overflow re-runs\n",
        ok && reruns > 0 ? "PASS" : "FAIL", mat[0].n, cpu.m1.n, mat[1].n, cpu.m2.n, mat[2].n,
        cpu.m3.n, reruns);
    int arr[9] = {5, 3, 5, 9, 1, 3, 3, 0, 9}, want[5] = {0, 1, 3, 5, 9};
    int nu = dm_tg_sort_unique(arr, 9);
    printf("%s track_gpu_gather_sort_unique: %d distinct\n",
           nu == 5 && !memcmp(arr, want, sizeof want) ? "PASS" : "FAIL", nu);
    for (int j = 0; j < 3; j++) {
        free(g.keys[j]);
        free(g.overflow[j]);
        free(ids[j]);
        dm_sparse_free(&mat[j]);
    }
    int set_clean = 1;
    for (int i = 0; i < 1 << bits; i++) set_clean &= set[i] == -1;
    printf(
        "%s track_gpu_gather_set_emptied: the distinct-voxel set is empty after every streamline\n",
        set_clean ? "PASS" : "FAIL");
    void *blocks[] = {a,           b,
                      set,         loop.keys,
                      loop.dirs,   loop.used,
                      g.paths,     g.seeds_to_targets,
                      f.dirs,      f.fracs,
                      f.brain,     sd.pos,
                      sd.svox,     m.flags,
                      m.seed_col,  m.t2_col,
                      m.t3_node,   m.target_off,
                      m.target_ids};
    for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++) free(blocks[i]);
    dm_track_surface_free(&m.surfaces);
    dm_track_result_free(&cpu);
    return 0;
}
