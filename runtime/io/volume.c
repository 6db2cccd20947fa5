/* NIfTI and MRtrix images: reading any data type into doubles, and writing float32, uint8,
 * float64 or uint32 images with another image's geometry.  A path ending in .mif, .mif.gz or
 * .mih is an MRtrix image (io/mif.h: its header and values; its geometry is given the form of a
 * NIfTI header here, so that every reader of dm_volume sees one kind); any other is NIfTI.
 *
 * Reading takes the header from niftilib (nifti_image_read without data) but reads the data
 * bytes itself through znzlib, because niftilib's data reader silently replaces NaN and Inf in
 * float images with 0, and the fitter must see them (it flags such voxels as non-finite).
 *
 * Writing builds the header with niftilib (nifti_make_new_nim + nifti_convert_nim2n?hdr) but
 * writes the bytes itself through znzlib, because nifti_image_write() returns nothing and so
 * cannot report a full disk; here every write and the final close are checked, the file is
 * written under a temporary name and renamed into place only when whole. */
#include "io/volume.h"
#include "io/formats.h"
#include "io/gz_blocks.h"
#include "io/mif.h"
#include "io/bigalloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/key_sort.h"
#include "util/interrupt.h"

#include <nifti2_io.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert((int)DM_OUT_FLOAT32 == (int)DM_MIF_FLOAT32 &&
                   (int)DM_OUT_UINT8 == (int)DM_MIF_UINT8 &&
                   (int)DM_OUT_FLOAT64 == (int)DM_MIF_FLOAT64 &&
                   (int)DM_OUT_UINT32 == (int)DM_MIF_UINT32,
               "io/mif.h's data types are io/volume.h's");

/* niftilib prints its own "** ERROR" lines on stderr at debug level >= 1; our messages say
 * the same in one line, so keep it quiet. */
static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static void quiet_niftilib(void)
{
    nifti_set_debug_level(0);
}

static int has_ending(const char *s, const char *ending)
{
    size_t n = strlen(s), m = strlen(ending);
    return n >= m && strcmp(s + n - m, ending) == 0;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* 1 when the file's first bytes (up to a NIfTI header's worth) are all printable text or white
 * space: a bvals file, say, given where an image belongs. */
static int is_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char buf[352];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if ((buf[i] < 0x20 && !strchr("\t\n\r\f\v", buf[i])) || buf[i] == 0 || buf[i] >= 0x7f)
            return 0;
    return n > 0;
}

/* Converts nvals values of the given NIfTI data type to doubles. */
static int convert_to_double(const void *src, int datatype, size_t nvals, double *dst)
{
#define CONVERT(type)                                                                              \
    for (size_t i = 0; i < nvals; i++) dst[i] = (double)((const type *)src)[i];                    \
    return 0
    switch (datatype) {
    case DT_UINT8: CONVERT(uint8_t);
    case DT_INT8: CONVERT(int8_t);
    case DT_INT16: CONVERT(int16_t);
    case DT_UINT16: CONVERT(uint16_t);
    case DT_INT32: CONVERT(int32_t);
    case DT_UINT32: CONVERT(uint32_t);
    case DT_INT64: CONVERT(int64_t);
    case DT_UINT64: CONVERT(uint64_t);
    case DT_FLOAT32: CONVERT(float);
    case DT_FLOAT64: CONVERT(double);
    case DT_FLOAT128: CONVERT(long double);
    default: return -1;
    }
#undef CONVERT
}

/* Explains why the image data could not be read: the data file is missing, or shorter than
 * the header says (truncated). */
static int load_error(const char *path, const nifti_image *nim)
{
    const char *data_file = nim->iname ? nim->iname : path;
    long long need = (long long)nim->iname_offset + (long long)nim->nvox * nim->nbyper;
    if (access(data_file, R_OK) != 0)
        return dm_set_error("%s: cannot read the image data file %s: %s", path, data_file,
                            strerror(errno));
    if (nifti_is_gzfile(data_file))
        return dm_set_error("%s: truncated or corrupt compressed file (the header promises %lld "
                            "bytes of image data)",
                            path, (long long)nim->nvox * nim->nbyper);
    long long have = file_size(data_file);
    if (have >= 0 && have < need)
        return dm_set_error("%s: truncated: the header needs %lld bytes but the file has %lld",
                            path, need, have);
    return dm_set_error("%s: cannot read the image data", path);
}

/* A .nii.gz read whole and inflated in memory (io/gz_blocks.h: dimoc's own files on all
 * cores, others by libdeflate in one thread, both faster than zlib's stream): its first `need`
 * bytes into a malloc'd *raw.  1 when done; 0 when the file should rather be streamed (over
 * 4 GiB of data: the whole compressed file and the raw bytes would be held beside the doubles);
 * -1 when it is damaged or short. */
static int read_gz_whole(const char *file, size_t need, unsigned char **raw)
{
    *raw = NULL;
    long long size = file_size(file);
    if (size <= 0 || need > ((size_t)4 << 30)) return 0;
    FILE *f = fopen(file, "rb");
    if (!f) return 0;
    /* (large: a study's subjects reuse them, io/bigalloc.h) */
    unsigned char *gz = dm_big_reuse((size_t)size);
    *raw = dm_big_reuse(need ? need : 1);
    int ok = gz && *raw && fread(gz, 1, (size_t)size, f) == (size_t)size &&
             dm_gz_inflate(gz, (size_t)size, *raw, need) == 0;
    fclose(f);
    dm_big_release(gz, (size_t)size);
    if (!ok) {
        dm_big_release(*raw, need ? need : 1);
        *raw = NULL;
        return -1;
    }
    return 1;
}

/* An uncompressed data file: chunks of `chunk` values read (pread) and converted on all
 * threads, each into its place. */
static int read_plain(const char *path, const nifti_image *nim, const char *data_file, int swap,
                      size_t chunk, double *data)
{
    const size_t total = (size_t)nim->nvox, bytes_per = (size_t)nim->nbyper;
    int fd = open(data_file, O_RDONLY);
    if (fd < 0) return load_error(path, nim);
    const size_t nchunks = (total + chunk - 1) / chunk;
    int bad = 0, stop = 0;
#pragma omp parallel reduction(| : bad, stop)
    {
        unsigned char *buf = malloc(chunk * bytes_per);
        bad |= !buf;
#pragma omp for schedule(dynamic, 1)
        for (size_t k = 0; k < nchunks; k++) {
            if (bad || stop || (stop = dm_stop_requested())) continue;
            const size_t start = k * chunk, n = total - start < chunk ? total - start : chunk;
            const off_t at = (off_t)nim->iname_offset + (off_t)(start * bytes_per);
            size_t got = 0; /* counted in bytes: a short last value is a short file */
            while (got < n * bytes_per) {
                ssize_t r = pread(fd, buf + got, n * bytes_per - got, at + (off_t)got);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) break;
                got += (size_t)r;
            }
            if (got != n * bytes_per) {
                bad = 1;
                continue;
            }
            if (swap) nifti_swap_Nbytes((int64_t)n, nim->swapsize, buf);
            convert_to_double(buf, nim->datatype, n, data + start);
        }
        free(buf);
    }
    close(fd);
    if (stop) return dm_stop_error();
    return bad ? load_error(path, nim) : 0;
}

/* Reads the image's values as stored (NaN and Inf kept) from the file niftilib names in
 * nim->iname at nim->iname_offset, swapping bytes when the file's byte order is not the host's,
 * and converts them to doubles in data (nim->nvox values).  Reads in chunks so that only one
 * chunk of raw bytes is held at a time. */
static int read_data(const char *path, const nifti_image *nim, double *data)
{
    const char *data_file = nim->iname ? nim->iname : path;
    if (nim->iname_offset < 0)
        return dm_set_error("%s: the header's data offset is negative (%lld)", path,
                            (long long)nim->iname_offset);
    size_t total = (size_t)nim->nvox, bytes_per = (size_t)nim->nbyper;
    int swap = nim->byteorder != nifti_short_order() && nim->swapsize > 1;
    if (nifti_is_gzfile(data_file)) {
        unsigned char *raw;
        size_t offset = (size_t)nim->iname_offset;
        const size_t need = offset + total * bytes_per;
        int r = read_gz_whole(data_file, need, &raw);
        if (r < 0) return load_error(path, nim);
        if (r == 1) {
            if (swap) nifti_swap_Nbytes((int64_t)total, nim->swapsize, raw + offset);
            const size_t step = 1 << 16;
#pragma omp parallel for schedule(static) if (total > 16 * step) /* small: not worth a team */
            for (size_t start = 0; start < total; start += step)
                convert_to_double(raw + offset + start * bytes_per, nim->datatype,
                                  total - start < step ? total - start : step, data + start);
            dm_big_release(raw, need);
            return 0;
        }
    }
    size_t chunk = total < (1 << 18) ? total : (1 << 18);
    if (!nifti_is_gzfile(data_file)) return read_plain(path, nim, data_file, swap, chunk, data);
    void *buf = malloc(chunk * bytes_per);
    if (!buf) return dm_set_error("%s: out of memory reading the image data", path);
    znzFile f = znzopen(data_file, "rb", nifti_is_gzfile(data_file));
    if (znz_isnull(f)) {
        free(buf);
        return load_error(path, nim);
    }
    int ok = znzseek(f, (znz_off_t)nim->iname_offset, SEEK_SET) >= 0;
    for (size_t start = 0; ok && start < total; start += chunk) {
        if (dm_stop_requested()) {
            znzclose(f);
            free(buf);
            return dm_stop_error();
        }
        size_t n = total - start < chunk ? total - start : chunk;
        /* Counted in bytes: znzread's count of whole values can hide a short last value. */
        ok = znzread(buf, 1, n * bytes_per, f) == n * bytes_per;
        if (ok && swap) nifti_swap_Nbytes((int64_t)n, nim->swapsize, buf);
        if (ok) convert_to_double(buf, nim->datatype, n, data + start);
    }
    znzclose(f);
    free(buf);
    return ok ? 0 : load_error(path, nim);
}

/* Before anything is allocated: the file holds as many bytes as the header promises (a
 * compressed file at most 1032 times its size, deflate's limit), so that a damaged or
 * malicious header cannot make us allocate memory for data that is not there. */
static int check_data_size(const char *path, const nifti_image *nim)
{
    const char *data_file = nim->iname ? nim->iname : path;
    if (nim->nbyper < 1 || nim->nvox < 1 || nim->nvox > INT64_MAX / 8 / nim->nbyper ||
        (uint64_t)nim->nvox > SIZE_MAX / sizeof(double))
        return dm_set_error("%s: the header's size (%lld values) is impossible", path,
                            (long long)nim->nvox);
    long long need = (long long)nim->nvox * nim->nbyper, have = file_size(data_file);
    if (have < 0) return load_error(path, nim);
    long long offset = nim->iname_offset > 0 ? (long long)nim->iname_offset : 0;
    if (nifti_is_gzfile(data_file)) {
        if (have < (need + offset) / 1032)
            return dm_set_error("%s: truncated or corrupt compressed file (the header promises "
                                "%lld bytes of image data)",
                                path, need);
    } else if (have - offset < need) {
        return load_error(path, nim);
    }
    return 0;
}

/* A NIfTI geometry for a voxel -> world matrix: the matrix as sform, and as qform its nearest
 * rotation with the column lengths as voxel sizes (what readers that ignore the sform see). */
static int geometry_from_affine(const char *path, nifti_image *g, const double vox2world[4][4])
{
    nifti_dmat44 m;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) m.m[i][j] = vox2world[i][j];
    double vox[3];
    for (int j = 0; j < 3; j++) {
        vox[j] = sqrt(m.m[0][j] * m.m[0][j] + m.m[1][j] * m.m[1][j] + m.m[2][j] * m.m[2][j]);
        if (!(vox[j] > 0) || !isfinite(vox[j]))
            return dm_set_error("%s: the voxel-to-world matrix has a degenerate column", path);
    }
    g->pixdim[1] = g->dx = vox[0];
    g->pixdim[2] = g->dy = vox[1];
    g->pixdim[3] = g->dz = vox[2];
    g->sform_code = g->qform_code = NIFTI_XFORM_SCANNER_ANAT;
    g->sto_xyz = m;
    g->sto_ijk = nifti_dmat44_inverse(m);
    double qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
    nifti_dmat44_to_quatern(m, &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);
    g->quatern_b = qb;
    g->quatern_c = qc;
    g->quatern_d = qd;
    g->qoffset_x = qx;
    g->qoffset_y = qy;
    g->qoffset_z = qz;
    g->qfac = qfac;
    g->qto_xyz = nifti_quatern_to_dmat44(qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac);
    g->qto_ijk = nifti_dmat44_inverse(g->qto_xyz);
    g->xyz_units = NIFTI_UNITS_MM;
    g->time_units = NIFTI_UNITS_SEC;
    return 0;
}

/* An MRtrix image: its values, and its grid as a NIfTI header of the same voxel -> world mm
 * mapping; the gradient table and other header lines kept in vol. */
static int read_mif(const char *path, dm_volume *vol, int values)
{
    dm_mif_image m;
    if (dm_mif_read(path, &m, values) != 0) return -1;
    int64_t dims[8] = {m.nt > 1 ? 4 : 3, m.nx, m.ny, m.nz, m.nt, 1, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, DT_FLOAT32, 0);
    if (!nim) {
        dm_mif_free(&m);
        return dm_set_error("%s: out of memory", path);
    }
    if (geometry_from_affine(path, nim, m.vox2world) != 0) {
        nifti_image_free(nim);
        dm_mif_free(&m);
        return -1;
    }
    if (m.nt > 1) nim->dt = nim->pixdim[4] = m.vox[3];
    vol->nx = m.nx;
    vol->ny = m.ny;
    vol->nz = m.nz;
    vol->nt = m.nt;
    vol->data = m.values;
    vol->geometry = nim;
    vol->dw_scheme = m.dw_scheme;
    vol->dw_rows = m.dw_rows;
    vol->keyvals = m.extra;
    return 0;
}

/* dm_volume_read, or its header alone (values == 0: vol->data NULL). */
static int read_volume(const char *path, dm_volume *vol, int values)
{
    memset(vol, 0, sizeof *vol);
    pthread_once(&quiet_once, quiet_niftilib);
    if (dm_mif_is_path(path)) return read_mif(path, vol, values);

    /* Name the real problem before niftilib hides it behind a NULL. */
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        char *found = errno == ENOENT ? nifti_findhdrname(path) : NULL;
        if (!found) return dm_set_error("cannot open %s: %s", path, strerror(errno));
        free(found); /* a prefix such as "dwi" for dwi.nii.gz: niftilib finds the file */
    } else {
        fclose(probe);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            return dm_set_error("%s is a directory, not a NIfTI image", path);
    }

    nifti_image *nim = nifti_image_read(path, 0);
    if (!nim) {
        if (is_text_file(path)) return dm_set_error("%s: a text file, not a NIfTI image", path);
        long long size = file_size(path);
        if (!nifti_is_gzfile(path) && size >= 0 && size < (long long)sizeof(nifti_1_header))
            return dm_set_error("%s: truncated: %lld bytes, shorter than a NIfTI header", path,
                                size);
        return dm_set_error("%s: not a NIfTI-1 or NIfTI-2 image (unreadable or damaged header)",
                            path);
    }
    /* Dimensions beyond dim[0] are unused and may hold 0 (niftilib itself writes them so). */
    int64_t *sizes[7] = {&nim->nx, &nim->ny, &nim->nz, &nim->nt, &nim->nu, &nim->nv, &nim->nw};
    for (int k = (int)(nim->ndim > 0 ? nim->ndim : 0); k < 7; k++) *sizes[k] = 1;
    if (nim->nu > 1 || nim->nv > 1 || nim->nw > 1) {
        dm_set_error("%s: %lld dimensions (%lldx%lldx%lldx%lldx%lld...); at most 4 are supported",
                     path, (long long)nim->ndim, (long long)nim->nx, (long long)nim->ny,
                     (long long)nim->nz, (long long)nim->nt, (long long)nim->nu);
        nifti_image_free(nim);
        return -1;
    }
    if (nim->nx < 1 || nim->ny < 1 || nim->nz < 1 || nim->nt < 1 || nim->nvox < 1) {
        dm_set_error("%s: empty image (size %lldx%lldx%lldx%lld)", path, (long long)nim->nx,
                     (long long)nim->ny, (long long)nim->nz, (long long)nim->nt);
        nifti_image_free(nim);
        return -1;
    }
    if (nim->nx > INT32_MAX || nim->ny > INT32_MAX || nim->nz > INT32_MAX || nim->nt > INT32_MAX) {
        dm_set_error("%s: a dimension is too large", path);
        nifti_image_free(nim);
        return -1;
    }
    double probe_value;
    uint64_t zero[2] = {0, 0};
    if (convert_to_double(zero, nim->datatype, 1, &probe_value) != 0) {
        dm_set_error("%s: data type %s is not supported (only real-valued types)", path,
                     nifti_datatype_to_string(nim->datatype));
        nifti_image_free(nim);
        return -1;
    }

    if (!values) {
        vol->nx = (int)nim->nx;
        vol->ny = (int)nim->ny;
        vol->nz = (int)nim->nz;
        vol->nt = (int)nim->nt;
        vol->geometry = nim;
        return 0;
    }
    if (check_data_size(path, nim) != 0) {
        nifti_image_free(nim);
        return -1;
    }
    size_t nvals = (size_t)nim->nvox;
    double *data = dm_big_reuse(nvals * sizeof *data); /* dm_volume_data_bytes */
    if (!data) {
        dm_set_error("%s: out of memory for %zu values", path, nvals);
        nifti_image_free(nim);
        return -1;
    }
    if (read_data(path, nim, data) != 0) {
        free(data);
        nifti_image_free(nim);
        return -1;
    }
    /* NIfTI: scaling applies when scl_slope is non-zero (and a number). */
    double slope = nim->scl_slope, inter = nim->scl_inter;
    if (slope != 0 && isfinite(slope) && (slope != 1 || inter != 0)) {
        if (!isfinite(inter)) inter = 0;
        for (size_t i = 0; i < nvals; i++) data[i] = slope * data[i] + inter;
    }

    vol->nx = (int)nim->nx;
    vol->ny = (int)nim->ny;
    vol->nz = (int)nim->nz;
    vol->nt = (int)nim->nt;
    vol->data = data;
    vol->geometry = nim;
    return 0;
}

/* The read-ahead cache (dm_volume_preload): at most two volumes read on another thread while
 * the caller works on something else, each kept under the identity of its file (device,
 * inode, size, modification time) so that a changed or replaced file is read again.  A read
 * of a cached file gets a copy (memcpy, far cheaper than inflating a .nii.gz), and waits for
 * one still being read instead of reading it a second time.  `dimoc bids` reads the next
 * run's DWI so while the current run fits; every stage of a run then reads it from here, the
 * last one taking the cached volume itself (dm_volume_preload_hand_over: no copy at all). */
enum { PRELOAD_SLOTS = 2, SLOT_EMPTY = 0, SLOT_LOADING, SLOT_READY };
typedef struct preload_slot {
    int state;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    unsigned long used; /* the clock of its last use: the oldest goes first */
    int hand_over;      /* the next read takes vol itself and empties the slot */
    dm_volume vol;
} preload_slot;
static pthread_mutex_t preload_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t preload_done = PTHREAD_COND_INITIALIZER;
static preload_slot preload_slots[PRELOAD_SLOTS];
static unsigned long preload_clock;
static int preload_used; /* set once a preload was asked for: plain reads skip the cache */

static int same_file(const preload_slot *s, const struct stat *st)
{
    return s->state != SLOT_EMPTY && s->dev == st->st_dev && s->ino == st->st_ino &&
           s->size == st->st_size && s->mtime.tv_sec == st->st_mtim.tv_sec &&
           s->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* A deep copy of a cached volume; 0, or -1 when out of memory. */
static int copy_volume(const dm_volume *from, dm_volume *to)
{
    memset(to, 0, sizeof *to);
    size_t n = DM_NVOX(from) * (size_t)from->nt;
    to->nx = from->nx, to->ny = from->ny, to->nz = from->nz, to->nt = from->nt;
    to->data = dm_big_alloc(n * sizeof *to->data);
    to->geometry = nifti_copy_nim_info((const nifti_image *)from->geometry);
    if (from->dw_scheme) {
        to->dw_scheme = malloc((size_t)from->dw_rows * 4 * sizeof *to->dw_scheme);
        if (to->dw_scheme)
            memcpy(to->dw_scheme, from->dw_scheme, (size_t)from->dw_rows * 4 * sizeof(double));
        to->dw_rows = from->dw_rows;
    }
    if (from->keyvals) to->keyvals = strdup(from->keyvals);
    if (!to->data || !to->geometry || (from->dw_scheme && !to->dw_scheme) ||
        (from->keyvals && !to->keyvals)) {
        dm_volume_free(to);
        return -1;
    }
    dm_big_copy(to->data, from->data, n * sizeof *to->data);
    return 0;
}

int dm_volume_preload(const char *path)
{
    return dm_volume_preload_then(path, NULL, NULL);
}

int dm_volume_preload_then(const char *path, void (*then)(const dm_volume *vol, void *ctx),
                           void *ctx)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0; /* the real read says why */
    pthread_mutex_lock(&preload_lock);
    preload_used = 1;
    preload_slot *slot = NULL;
    for (int i = 0; i < PRELOAD_SLOTS; i++)
        if (same_file(&preload_slots[i], &st)) {
            preload_slots[i].used = ++preload_clock;
            pthread_mutex_unlock(&preload_lock);
            return 0;
        }
    for (int i = 0; i < PRELOAD_SLOTS; i++) { /* an empty slot, else the oldest ready one */
        preload_slot *s = &preload_slots[i];
        if (s->state == SLOT_LOADING) continue;
        if (!slot || s->state == SLOT_EMPTY || (slot->state != SLOT_EMPTY && s->used < slot->used))
            slot = s;
    }
    if (!slot) { /* both being read: this one is read when it is needed */
        pthread_mutex_unlock(&preload_lock);
        return 0;
    }
    dm_volume_free(&slot->vol);
    slot->state = SLOT_LOADING;
    slot->hand_over = 0;
    slot->dev = st.st_dev, slot->ino = st.st_ino, slot->size = st.st_size;
    slot->mtime = st.st_mtim;
    slot->used = ++preload_clock;
    pthread_mutex_unlock(&preload_lock);

    dm_volume v;
    int rc = read_volume(path, &v, 1);
    if (rc == 0 && then) then(&v, ctx); /* still this thread's own: readers wait for it */
    pthread_mutex_lock(&preload_lock);
    if (rc == 0)
        slot->vol = v, slot->state = SLOT_READY;
    else
        slot->state = SLOT_EMPTY;
    pthread_cond_broadcast(&preload_done);
    pthread_mutex_unlock(&preload_lock);
    return rc;
}

void dm_volume_preload_clear(void)
{
    pthread_mutex_lock(&preload_lock);
    for (int i = 0; i < PRELOAD_SLOTS; i++) {
        while (preload_slots[i].state == SLOT_LOADING)
            pthread_cond_wait(&preload_done, &preload_lock);
        dm_volume_free(&preload_slots[i].vol);
        preload_slots[i].state = SLOT_EMPTY;
    }
    pthread_mutex_unlock(&preload_lock);
}

int dm_volume_preload_hand_over(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    int found = 0;
    pthread_mutex_lock(&preload_lock);
    for (int i = 0; i < PRELOAD_SLOTS && !found; i++)
        if (same_file(&preload_slots[i], &st)) found = preload_slots[i].hand_over = 1;
    pthread_mutex_unlock(&preload_lock);
    return found;
}

/* The cached copy of path's file: 1 (vol filled), 0 (not cached), -1 (out of memory).  A slot
 * marked for hand-over gives its volume itself and is emptied. */
static int read_preloaded(const char *path, dm_volume *vol)
{
    struct stat st;
    pthread_mutex_lock(&preload_lock);
    int used = preload_used;
    pthread_mutex_unlock(&preload_lock);
    if (!used || stat(path, &st) != 0) return 0;
    int found = 0;
    pthread_mutex_lock(&preload_lock);
    for (int i = 0; i < PRELOAD_SLOTS && !found; i++) {
        preload_slot *s = &preload_slots[i];
        while (same_file(s, &st) && s->state == SLOT_LOADING)
            pthread_cond_wait(&preload_done, &preload_lock);
        if (same_file(s, &st) && s->state == SLOT_READY) {
            s->used = ++preload_clock;
            if (s->hand_over) {
                *vol = s->vol;
                memset(&s->vol, 0, sizeof s->vol);
                s->state = SLOT_EMPTY;
                s->hand_over = 0;
                found = 1;
            } else {
                found = copy_volume(&s->vol, vol) == 0 ? 1 : -1;
            }
        }
    }
    pthread_mutex_unlock(&preload_lock);
    if (found < 0) return dm_set_error("%s: out of memory for a copy of its values", path);
    return found;
}

int dm_volume_read(const char *path, dm_volume *vol)
{
    int cached = read_preloaded(path, vol);
    if (cached != 0) return cached > 0 ? 0 : -1;
    return read_volume(path, vol, 1);
}

/* The header of path's cached volume (no values): 1 (vol filled), 0 (not cached), -1. */
static int header_preloaded(const char *path, dm_volume *vol)
{
    struct stat st;
    pthread_mutex_lock(&preload_lock);
    int used = preload_used;
    pthread_mutex_unlock(&preload_lock);
    if (!used || stat(path, &st) != 0) return 0;
    int found = 0;
    pthread_mutex_lock(&preload_lock);
    for (int i = 0; i < PRELOAD_SLOTS && !found; i++) {
        const preload_slot *s = &preload_slots[i];
        if (!same_file(s, &st) || s->state != SLOT_READY) continue;
        const dm_volume *from = &s->vol;
        memset(vol, 0, sizeof *vol);
        vol->nx = from->nx, vol->ny = from->ny, vol->nz = from->nz, vol->nt = from->nt;
        vol->geometry = nifti_copy_nim_info((const nifti_image *)from->geometry);
        if (from->dw_scheme) {
            vol->dw_scheme = malloc((size_t)from->dw_rows * 4 * sizeof *vol->dw_scheme);
            if (vol->dw_scheme)
                memcpy(vol->dw_scheme, from->dw_scheme, (size_t)from->dw_rows * 4 * sizeof(double));
            vol->dw_rows = from->dw_rows;
        }
        if (from->keyvals) vol->keyvals = strdup(from->keyvals);
        found = vol->geometry && (!from->dw_scheme || vol->dw_scheme) &&
                        (!from->keyvals || vol->keyvals)
                    ? 1
                    : -1;
        if (found < 0) dm_volume_free(vol);
    }
    pthread_mutex_unlock(&preload_lock);
    if (found < 0) return dm_set_error("%s: out of memory for a copy of its header", path);
    return found;
}

int dm_volume_read_header(const char *path, dm_volume *vol)
{
    int cached = header_preloaded(path, vol);
    if (cached != 0) return cached > 0 ? 0 : -1;
    return read_volume(path, vol, 0);
}

void dm_volume_free(dm_volume *vol)
{
    if (!vol) return;
    free(vol->data);
    free(vol->dw_scheme);
    free(vol->keyvals);
    if (vol->geometry) nifti_image_free((nifti_image *)vol->geometry);
    memset(vol, 0, sizeof *vol);
}

/* Copies the spatial geometry (voxel sizes, qform, sform, units, slice/phase axes) of `from`
 * into `to`, which has its own dims and data type. */
static void copy_geometry(nifti_image *to, const nifti_image *from)
{
    to->dx = to->pixdim[1] = from->pixdim[1];
    to->dy = to->pixdim[2] = from->pixdim[2];
    to->dz = to->pixdim[3] = from->pixdim[3];
    if (from->pixdim[4] > 0) to->dt = to->pixdim[4] = from->pixdim[4];
    to->qform_code = from->qform_code;
    to->quatern_b = from->quatern_b;
    to->quatern_c = from->quatern_c;
    to->quatern_d = from->quatern_d;
    to->qoffset_x = from->qoffset_x;
    to->qoffset_y = from->qoffset_y;
    to->qoffset_z = from->qoffset_z;
    to->qfac = from->qfac;
    to->qto_xyz = from->qto_xyz;
    to->qto_ijk = from->qto_ijk;
    to->sform_code = from->sform_code;
    to->sto_xyz = from->sto_xyz;
    to->sto_ijk = from->sto_ijk;
    to->xyz_units = from->xyz_units;
    to->time_units = from->time_units;
    to->toffset = from->toffset;
    to->freq_dim = from->freq_dim;
    to->phase_dim = from->phase_dim;
    to->slice_dim = from->slice_dim;
}

/* Geometry made from scratch: voxel size in mm, identity orientation, origin at voxel 0. */
static void default_geometry(nifti_image *nim, double voxel_mm)
{
    nim->dx = nim->dy = nim->dz = voxel_mm;
    for (int k = 1; k <= 3; k++) nim->pixdim[k] = voxel_mm;
    nim->qform_code = nim->sform_code = NIFTI_XFORM_SCANNER_ANAT;
    nim->quatern_b = nim->quatern_c = nim->quatern_d = 0;
    nim->qoffset_x = nim->qoffset_y = nim->qoffset_z = 0;
    nim->qfac = 1;
    nim->qto_xyz = nifti_quatern_to_dmat44(0, 0, 0, 0, 0, 0, voxel_mm, voxel_mm, voxel_mm, 1);
    nim->qto_ijk = nifti_dmat44_inverse(nim->qto_xyz);
    nim->sto_xyz = nim->qto_xyz;
    nim->sto_ijk = nim->qto_ijk;
    nim->xyz_units = NIFTI_UNITS_MM;
    nim->time_units = NIFTI_UNITS_SEC;
}

/* Converts values [start, start+n) to the output type. */
static void convert_chunk(const double *src, size_t n, int type, void *dst)
{
    if (type == DM_OUT_FLOAT64) {
        memcpy(dst, src, n * sizeof(double));
    } else if (type == DM_OUT_UINT32) {
        uint32_t *out = dst;
        for (size_t i = 0; i < n; i++) {
            double v = src[i];
            out[i] = !(v > 0) ? 0 : v >= 4294967295.0 ? UINT32_MAX : (uint32_t)llround(v);
        }
    } else if (type == DM_OUT_UINT8) {
        uint8_t *out = dst;
        for (size_t i = 0; i < n; i++) {
            double v = src[i];
            out[i] = !(v > 0) ? 0 : v >= 255 ? 255 : (uint8_t)lround(v);
        }
    } else {
        float *out = dst;
#pragma omp simd /* out and src never overlap */
        for (size_t i = 0; i < n; i++) out[i] = (float)src[i];
    }
}

/* Header bytes for an image of this size: NIfTI-1 when every dimension fits in its 16-bit
 * field, NIfTI-2 otherwise.  Followed on disk by 4 zero bytes (no extensions). */
static int make_header(const char *path, nifti_image *nim, unsigned char *hdr, size_t *hdr_len)
{
    int n1 = nim->nx <= 32767 && nim->ny <= 32767 && nim->nz <= 32767 && nim->nt <= 32767;
    if (n1) {
        nifti_1_header h;
        if (nifti_convert_nim2n1hdr(nim, &h) != 0)
            return dm_set_error("%s: cannot make a NIfTI-1 header", path);
        h.vox_offset = sizeof h + 4;
        memcpy(h.magic, "n+1\0", 4);
        for (int k = h.dim[0] + 1; k < 8; k++)
            h.dim[k] = 1; /* unused dimensions read as 1, as FSL writes them */
        memcpy(hdr, &h, sizeof h);
        *hdr_len = sizeof h;
    } else {
        nifti_2_header h;
        if (nifti_convert_nim2n2hdr(nim, &h) != 0)
            return dm_set_error("%s: cannot make a NIfTI-2 header", path);
        h.vox_offset = sizeof h + 4;
        memcpy(h.magic, "n+2\0\r\n\032\n", 8);
        for (int k = (int)h.dim[0] + 1; k < 8; k++) h.dim[k] = 1;
        memcpy(hdr, &h, sizeof h);
        *hdr_len = sizeof h;
    }
    memset(hdr + *hdr_len, 0, 4);
    *hdr_len += 4;
    return 0;
}

/* Where an image's values come from: an array of doubles, or a function that makes them. */
typedef struct value_source {
    const double *data;      /* NIfTI order; NULL: values */
    dm_volume_values values; /* with ctx */
    void *ctx;
} value_source;

/* Values [first, first + n) of the source converted to `type` into out (aligned for it). */
static void source_convert(const value_source *src, size_t first, size_t n, int type, void *out)
{
    if (src->data) {
        convert_chunk(src->data + first, n, type, out);
        return;
    }
    const size_t bp = type == DM_OUT_UINT8 ? 1 : type == DM_OUT_FLOAT64 ? 8 : 4;
    double made[512];
    for (size_t done = 0; done < n; done += 512) {
        size_t k = n - done < 512 ? n - done : 512;
        src->values(src->ctx, first + done, k, made);
        convert_chunk(made, k, type, (unsigned char *)out + done * bp);
    }
}

/* The bytes of an image file being written: its header, then its values converted from doubles
 * to `type` (dm_gz_fill). */
typedef struct image_bytes {
    const unsigned char *hdr;
    size_t hdr_len, bytes_per;
    const value_source *src;
    int type;
} image_bytes;

static void fill_image(void *ctx, size_t offset, size_t n, unsigned char *out)
{
    const image_bytes *im = ctx;
    if (offset < im->hdr_len) { /* the header, or its end */
        size_t h = im->hdr_len - offset < n ? im->hdr_len - offset : n;
        memcpy(out, im->hdr + offset, h);
        offset += h, out += h, n -= h;
    }
    /* the values of [offset, offset + n) of the data; a member may begin or end inside a value,
     * whose bytes then come from a converted copy */
    const size_t bp = im->bytes_per;
    size_t at = offset - im->hdr_len;
    double value_d; /* one value of any output type, aligned */
    unsigned char *value = (unsigned char *)&value_d;
    if (n > 0 && at % bp) {
        size_t skip = at % bp, take = bp - skip < n ? bp - skip : n;
        source_convert(im->src, at / bp, 1, im->type, value);
        memcpy(out, value + skip, take);
        at += take, out += take, n -= take;
    }
    size_t whole = n / bp;
    if ((uintptr_t)out % bp == 0) { /* aligned for the type: converted in place */
        source_convert(im->src, at / bp, whole, im->type, out);
    } else { /* after a header of odd length (a .mif's): through an aligned copy */
        double chunk[256]; /* 256 values of any output type */
        for (size_t done = 0; done < whole; done += 256) {
            size_t k = whole - done < 256 ? whole - done : 256;
            source_convert(im->src, at / bp + done, k, im->type, chunk);
            memcpy(out + done * bp, chunk, k * bp);
        }
    }
    at += whole * bp, out += whole * bp, n -= whole * bp;
    if (n > 0) {
        source_convert(im->src, at / bp, 1, im->type, value);
        memcpy(out, value, n);
    }
}

/* Writes the header and then `total` values to a temporary beside path, renamed into place
 * when whole: converted from data to `type`, or the bytes raw[] as they are.  A .gz file is
 * compressed in blocks on all cores (io/gz_blocks.h: level 1, as float maps compress barely
 * better at higher levels, and more slowly), each block's bytes made on the thread that
 * compresses it; a plain file's bytes are laid out in memory first. */
static int write_stream(const char *path, const char *ending, const unsigned char *hdr,
                        size_t hdr_len, size_t total, size_t bytes_per, const value_source *src,
                        int type, const unsigned char *raw)
{
    size_t nbytes = hdr_len + total * bytes_per;
    int gz = has_ending(ending, ".gz");
    const int filled = gz && !raw; /* no copy of the file's bytes: made block by block */
    /* raw right after the header (dm_volume_bytes): the file's bytes are there already */
    int in_place = raw && raw == hdr + hdr_len;
    unsigned char *img = in_place || filled ? (unsigned char *)hdr : malloc(nbytes);
    if (!img) return dm_set_error("cannot write %s: out of memory (%zu bytes)", path, nbytes);
    if (!in_place && !filled) memcpy(img, hdr, hdr_len);
    if (raw && !in_place) {
        memcpy(img + hdr_len, raw, total * bytes_per);
    } else if (!raw && !filled) {
        const size_t chunk = 1 << 16;
#pragma omp parallel for schedule(static) if (total > 16 * chunk)
        for (size_t start = 0; start < total; start += chunk) {
            size_t n = total - start < chunk ? total - start : chunk;
            source_convert(src, start, n, type, img + hdr_len + start * bytes_per);
        }
    }
    image_bytes im = {hdr, hdr_len, bytes_per, src, type};
    /* The temporary keeps the image's ending so that a leftover is still recognisable. */
    char *tmp = dm_temp_sibling_ext(path, ending);
    FILE *f = tmp ? fopen(tmp, "wb") : NULL;
    int ok = f != NULL, stopped = 0, saved_errno = errno;
    if (ok && (stopped = dm_stop_requested() != 0)) ok = 0; /* a signal: stop, remove it */
    if (ok && filled)
        ok = dm_gz_write_filled(f, nbytes, fill_image, &im) == 0;
    else if (ok)
        ok = gz ? dm_gz_write_blocks(f, img, nbytes) == 0 : fwrite(img, 1, nbytes, f) == nbytes;
    if (!ok) saved_errno = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = 0;
        saved_errno = errno;
    }
    if (!in_place && !filled) free(img);
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        saved_errno = errno;
    }
    if (!ok) {
        if (tmp) unlink(tmp);
        if (stopped)
            dm_stop_error();
        else
            dm_set_error("cannot write %s: %s", path,
                         saved_errno ? strerror(saved_errno) : "write failed");
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* The ending of an image path that dimoc writes (.nii.gz, .nii, .mif.gz, .mif), or NULL. */
static const char *image_ending(const char *path)
{
    static const char *const endings[] = {".nii.gz", ".nii", ".mif.gz", ".mif"};
    for (int i = 0; i < 4; i++)
        if (has_ending(path, endings[i])) return endings[i];
    return NULL;
}

/* The voxel -> world mm matrix of a NIfTI header: sform when set, else qform, else the voxel
 * sizes (as io/space.h reads an image). */
static void header_vox2world(const nifti_image *nim, double m[4][4])
{
    const nifti_dmat44 *x = nim->sform_code > 0   ? &nim->sto_xyz
                            : nim->qform_code > 0 ? &nim->qto_xyz
                                                  : NULL;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            m[i][j] = x ? x->m[i][j] : i == j ? (i < 3 ? nim->pixdim[i + 1] : 1.0) : 0.0;
}

static int write_image(const char *path, const nifti_image *geometry, double voxel_mm, int nx,
                       int ny, int nz, int nt, const value_source *src, int type,
                       const double *dw_scheme)
{
    pthread_once(&quiet_once, quiet_niftilib);
    const char *ending = image_ending(path);
    if (!ending)
        return dm_set_error("%s: output names must end in .nii, .nii.gz, .mif or .mif.gz", path);
    if (nx < 1 || ny < 1 || nz < 1 || nt < 1 || (!src->data && !src->values))
        return dm_set_error("%s: nothing to write (size %dx%dx%dx%d)", path, nx, ny, nz, nt);

    int64_t dims[8] = {nt > 1 ? 4 : 3, nx, ny, nz, nt, 1, 1, 1};
    int datatype = type == DM_OUT_UINT8     ? DT_UINT8
                   : type == DM_OUT_UINT32  ? DT_UINT32
                   : type == DM_OUT_FLOAT64 ? DT_FLOAT64
                                            : DT_FLOAT32;
    size_t bytes_per = type == DM_OUT_UINT8 ? 1 : type == DM_OUT_FLOAT64 ? 8 : 4;
    nifti_image *nim = nifti_make_new_nim(dims, datatype, 0);
    if (!nim) return dm_set_error("%s: cannot make a NIfTI header", path);
    if (geometry)
        copy_geometry(nim, geometry);
    else
        default_geometry(nim, voxel_mm);

    if (has_ending(ending, ".mif") || has_ending(ending, ".mif.gz")) {
        double m[4][4];
        header_vox2world(nim, m);
        size_t hdr_len = 0;
        char *hdr = dm_mif_header(nx, ny, nz, nt, nim->pixdim[4], (const double(*)[4])m, type,
                                  dw_scheme, dw_scheme ? nt : 0, &hdr_len);
        nifti_image_free(nim);
        if (!hdr) return dm_set_error("%s: %s", path, dm_last_error());
        int rc = write_stream(path, ending, (unsigned char *)hdr, hdr_len,
                              (size_t)nx * ny * nz * nt, bytes_per, src, type, NULL);
        free(hdr);
        return rc;
    }
    nim->intent_code = NIFTI_INTENT_NONE;
    nim->scl_slope = 0;
    nim->scl_inter = 0;
    nim->cal_min = nim->cal_max = 0;
    snprintf(nim->descrip, sizeof nim->descrip, "dimoc");
    nim->nifti_type = NIFTI_FTYPE_NIFTI1_1;

    unsigned char hdr[sizeof(nifti_2_header) + 4];
    size_t hdr_len = 0;
    int status = make_header(path, nim, hdr, &hdr_len);
    nifti_image_free(nim);
    if (status != 0) return -1;

    return write_stream(path, ending, hdr, hdr_len, (size_t)nx * ny * nz * nt, bytes_per, src,
                        type, NULL);
}

char *dm_volume_temp_name(const char *path)
{
    const char *ending = image_ending(path);
    if (!ending) {
        dm_set_error("%s: output names must end in .nii, .nii.gz, .mif or .mif.gz", path);
        return NULL;
    }
    return dm_temp_sibling_ext(path, ending);
}

int dm_volume_write(const char *path, const dm_volume *like, int nt, const double *data, int type)
{
    const value_source src = {data, NULL, NULL};
    return write_image(path, (const nifti_image *)like->geometry, 1.0, like->nx, like->ny, like->nz,
                       nt, &src, type, NULL);
}

int dm_volume_write_dwi(const char *path, const dm_volume *like, int nt, const double *data,
                        int type, const double *dw_scheme)
{
    const value_source src = {data, NULL, NULL};
    return write_image(path, (const nifti_image *)like->geometry, 1.0, like->nx, like->ny, like->nz,
                       nt, &src, type, dw_scheme);
}

void dm_masked_values_get(void *ctx, size_t first, size_t n, double *out)
{
    const dm_masked_values *m = ctx;
    while (n > 0) {
        const size_t c = first / m->nvox, g0 = first % m->nvox;
        const size_t end = g0 + (m->nvox - g0 < n ? m->nvox - g0 : n); /* within volume c */
        const size_t at = c * m->volume_stride + m->first;
        const double *vals = m->vals ? m->vals + at : NULL;
        const float *fvals = m->vals ? NULL : m->fvals + at;
        /* from the first listed voxel at or after g0: the runs between listed voxels zeroed
         * at once (outside a brain mask, most of the grid) */
        size_t g = g0, i = dm_lower_bound(m->vox, m->n, g0);
        while (g < end) {
            size_t next = i < m->n && m->vox[i] < end ? m->vox[i] : end;
            memset(out, 0, (next - g) * sizeof *out);
            out += next - g;
            g = next;
            if (g == end) break;
            const double v = vals ? vals[i * m->stride] : (double)fvals[i * m->stride];
            *out++ = !m->keep || m->keep[g] ? v : 0;
            g++, i++;
        }
        first += end - g0, n -= end - g0;
    }
}

int dm_volume_write_made(const char *path, const dm_volume *like, int nt, dm_volume_values values,
                         void *ctx, int type, const double *dw_scheme)
{
    const value_source src = {NULL, values, ctx};
    return write_image(path, (const nifti_image *)like->geometry, 1.0, like->nx, like->ny, like->nz,
                       nt, &src, type, dw_scheme);
}

int dm_volume_write_affine(const char *path, int nx, int ny, int nz, const double vox2world[4][4],
                           const double *data, int type)
{
    nifti_image geometry;
    memset(&geometry, 0, sizeof geometry);
    if (geometry_from_affine(path, &geometry, vox2world) != 0) return -1;
    const value_source src = {data, NULL, NULL};
    return write_image(path, &geometry, 1.0, nx, ny, nz, 1, &src, type, NULL);
}

char *dm_volume_output_path(const char *dir, const char *name)
{
    char *joined = dm_path_join(dir, name);
    char *path = joined ? dm_image_output_name(joined) : NULL;
    free(joined);
    return path;
}

char *dm_volume_find(const char *dir, const char *stem)
{
    char *base = dm_path_join(dir, stem);
    if (!base) return NULL;
    const char *chosen = dm_image_format_ext(dm_image_format_chosen());
    const char *const endings[] = {chosen, ".nii.gz", ".nii", ".mif", ".mif.gz"};
    size_t n = strlen(base);
    char *path = malloc(n + 8);
    for (int i = 0; path && i < 5; i++) {
        memcpy(path, base, n);
        strcpy(path + n, endings[i]);
        if (access(path, F_OK) == 0) break;
        if (i == 4) strcpy(path + n, chosen);
    }
    free(base);
    return path;
}

int dm_volume_write_new(const char *path, int nx, int ny, int nz, int nt, double voxel_mm,
                        const double *data)
{
    if (!(voxel_mm > 0)) return dm_set_error("%s: voxel size must be positive", path);
    const value_source src = {data, NULL, NULL};
    return write_image(path, NULL, voxel_mm, nx, ny, nz, nt, &src, 0, NULL);
}

int dm_volume_bytes_read(const char *path, dm_volume_bytes *b)
{
    memset(b, 0, sizeof *b);
    pthread_once(&quiet_once, quiet_niftilib);
    nifti_image *nim = nifti_image_read(path, 0);
    if (!nim) return dm_set_error("%s: cannot read (missing, or not NIfTI)", path);
    int rc = 0;
    if (nim->iname && strcmp(nim->iname, path))
        rc = dm_set_error("%s: a two-file image (.hdr/.img); give a .nii or .nii.gz", path);
    if (rc == 0) rc = check_data_size(path, nim);
    if (rc == 0) {
        b->nvox = (size_t)nim->nx * nim->ny * nim->nz;
        b->nt = (size_t)nim->nvox / (b->nvox ? b->nvox : 1);
        b->datatype = nim->datatype;
        b->bytes_per = nim->nbyper;
        b->swapped = nim->byteorder != nifti_short_order() && nim->swapsize > 1;
        b->header_len = (size_t)nim->iname_offset;
        size_t nbytes = (size_t)nim->nvox * (size_t)nim->nbyper;
        unsigned char *raw = NULL;
        int r = nifti_is_gzfile(path) ? read_gz_whole(path, b->header_len + nbytes, &raw) : 0;
        if (r != 0) { /* inflated whole */
            if (r < 0) rc = load_error(path, nim);
            b->header = raw;
            b->values = raw ? raw + b->header_len : NULL;
            nifti_image_free(nim);
            if (rc != 0) dm_volume_bytes_free(b);
            return rc;
        }
        b->header = malloc(b->header_len + nbytes + 1);
        b->values = b->header ? b->header + b->header_len : NULL;
        znzFile f = znzopen(path, "rb", nifti_is_gzfile(path));
        if (znz_isnull(f) || !b->header) {
            rc = load_error(path, nim);
        } else {
            if (znzread(b->header, 1, b->header_len + nbytes, f) != b->header_len + nbytes)
                rc = load_error(path, nim);
        }
        if (!znz_isnull(f)) znzclose(f);
    }
    nifti_image_free(nim);
    if (rc != 0) dm_volume_bytes_free(b);
    return rc;
}

int dm_volume_bytes_write(const char *path, const dm_volume_bytes *b)
{
    const char *ending = has_ending(path, ".nii.gz") ? ".nii.gz" : ".nii";
    if (!has_ending(path, ".nii.gz") && !has_ending(path, ".nii"))
        return dm_set_error("%s: output names must end in .nii or .nii.gz", path);
    return write_stream(path, ending, b->header, b->header_len, b->nvox * b->nt,
                        (size_t)b->bytes_per, NULL, 0, b->values);
}

void dm_volume_bytes_free(dm_volume_bytes *b)
{
    free(b->header); /* the values follow it in the same block */
    memset(b, 0, sizeof *b);
}
