/* Output formats: the process's choice and the endings that name them. */
#include "formats.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static dm_image_format chosen_image = DM_IMAGE_NII_GZ;
static dm_tracts_format chosen_tracts = DM_TRACTS_TCK;

static const char *const image_ext[] = {".nii.gz", ".nii", ".mif", ".mif.gz"};
static const char *const tracts_ext[] = {".tck", ".trx", ".trk"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && !strcasecmp(s + n - m, end);
}

int dm_formats_parse(const char *spec, dm_image_format *image, dm_tracts_format *tracts)
{
    int have_image = 0, have_tracts = 0;
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int found = 0;
        for (int i = 0; i < COUNT(image_ext) && !found; i++)
            if (strlen(image_ext[i] + 1) == len && !strncasecmp(p, image_ext[i] + 1, len)) {
                if (have_image++)
                    return dm_set_error("--format '%s': two image formats; give one", spec);
                *image = (dm_image_format)i;
                found = 1;
            }
        for (int i = 0; i < COUNT(tracts_ext) && !found; i++)
            if (strlen(tracts_ext[i] + 1) == len && !strncasecmp(p, tracts_ext[i] + 1, len)) {
                if (have_tracts++)
                    return dm_set_error("--format '%s': two tractogram formats; give one", spec);
                *tracts = (dm_tracts_format)i;
                found = 1;
            }
        if (!found)
            return dm_set_error("--format '%s': '%.*s' is no format (images: nii.gz, nii, mif, "
                                "mif.gz; tractograms: tck, trx, trk)",
                                spec, (int)len, p);
        if (!end) return 0;
        p = end + 1;
    }
}

void dm_formats_set(dm_image_format image, dm_tracts_format tracts)
{
    chosen_image = image;
    chosen_tracts = tracts;
}

dm_image_format dm_image_format_chosen(void) { return chosen_image; }
dm_tracts_format dm_tracts_format_chosen(void) { return chosen_tracts; }
const char *dm_image_format_ext(dm_image_format f) { return image_ext[f]; }
const char *dm_tracts_format_ext(dm_tracts_format f) { return tracts_ext[f]; }

int dm_image_format_of(const char *path)
{
    /* .nii.gz before .nii is not an issue (distinct endings); .mif.gz before .mif likewise */
    for (int i = 0; i < COUNT(image_ext); i++)
        if (ends_with(path, image_ext[i])) return i;
    if (ends_with(path, ".hdr") || ends_with(path, ".img") || ends_with(path, ".hdr.gz") ||
        ends_with(path, ".img.gz"))
        return DM_IMAGE_NII;
    return -1;
}

int dm_tracts_format_of(const char *path)
{
    for (int i = 0; i < COUNT(tracts_ext); i++)
        if (ends_with(path, tracts_ext[i])) return i;
    return -1;
}

static char *with_ending(const char *path, size_t stem, const char *ext)
{
    size_t m = strlen(ext);
    char *s = malloc(stem + m + 1);
    if (!s) return NULL;
    memcpy(s, path, stem);
    memcpy(s + stem, ext, m + 1);
    return s;
}

char *dm_image_output_name(const char *path)
{
    int f = dm_image_format_of(path);
    size_t stem = strlen(path) - (f >= 0 && ends_with(path, image_ext[f]) ? strlen(image_ext[f]) : 0);
    return with_ending(path, stem, image_ext[chosen_image]);
}

char *dm_tracts_output_name(const char *path)
{
    int f = dm_tracts_format_of(path);
    size_t stem = strlen(path) - (f >= 0 ? strlen(tracts_ext[f]) : 0);
    return with_ending(path, stem, tracts_ext[chosen_tracts]);
}
