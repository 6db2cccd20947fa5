/* 8-bit PNG files (libpng), for quick-look pictures. */
#ifndef DIMOC_PNG_WRITE_H
#define DIMOC_PNG_WRITE_H

/* Writes width x height pixels, rows top to bottom, `channels` bytes per pixel (1: grey,
 * 3: RGB), to `path` through a temporary name in the same folder renamed into place when
 * whole.  0, or -1 with dm_last_error() naming the file. */
int dm_png_write(const char *path, int width, int height, int channels,
                 const unsigned char *pixels);

#endif
