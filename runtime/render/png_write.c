/* PNG writing through libpng; libpng reports errors by longjmp, caught here and turned into
 * one dm_set_error line. */
#include "render/png_write.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* libpng's messages end up here; the first one is kept for the error line. */
static void on_png_error(png_structp png, png_const_charp msg)
{
    char *keep = png_get_error_ptr(png);
    snprintf(keep, 200, "%s", msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    dm_warn("libpng: %s", msg);
}

/* The libpng part, kept apart so that no local changes between setjmp and longjmp. */
static int encode(FILE *f, int width, int height, int channels, const unsigned char *pixels,
                  char *msg)
{
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, msg, on_png_error, on_png_warning);
    if (!png) return -1;
    png_infop info = png_create_info_struct(png);
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8,
                 channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, pixels + (size_t)y * width * channels);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 0;
}

int dm_png_write(const char *path, int width, int height, int channels, const unsigned char *pixels)
{
    if (width <= 0 || height <= 0 || (channels != 1 && channels != 3))
        return dm_set_error("%s: cannot write a %dx%d PNG with %d channels", path, width, height,
                            channels);
    char *tmp = dm_temp_sibling_ext(path, ".png");
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = dm_set_error("%s: cannot write: %s", path, strerror(errno));
        free(tmp);
        return rc;
    }
    char msg[200] = "libpng failed";
    int rc = encode(f, width, height, channels, pixels, msg);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(msg, sizeof msg, "%s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        snprintf(msg, sizeof msg, "cannot rename into place: %s", strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        unlink(tmp);
        dm_set_error("%s: %s", path, msg);
    }
    free(tmp);
    return rc;
}
