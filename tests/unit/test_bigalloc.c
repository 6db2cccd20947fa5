/* runtime/io/bigalloc.c: buffers given back while keeping are handed out again for a size they
 * serve (at least the size asked, at most 4/3 of it), the latest first.  Each
 * buffer handed out is written whole (AddressSanitizer's build checks its extent, and that the
 * buffers given back without keeping, or dropped, are freed: its leak check). */
#include "io/bigalloc.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void check(const char *name, int ok, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, ok ? "" : ": ", ok ? "" : detail);
    failures += !ok;
}

static void *use(size_t bytes)
{
    void *p = dm_big_reuse(bytes);
    if (p) memset(p, 0x5a, bytes);
    return p;
}

int main(void)
{
    const size_t MB = 1 << 20;
    void *a = use(40 * MB); /* freed: no keeping yet */
    dm_big_release(a, 40 * MB);

    dm_big_keep(1);
    void *c = use(40 * MB);
    dm_big_release(c, 40 * MB);
    void *d = use(36 * MB);
    check("kept-buffer-reused", d == c, "a new buffer for a size the kept one serves");
    void *e = use(20 * MB);
    check("too-large-not-reused", e != c && e != NULL, "a buffer of twice the size handed out");
    dm_big_release(e, 20 * MB);
    void *f = use(50 * MB);
    check("too-small-not-reused", f != e && f != NULL, "a smaller buffer handed out");
    dm_big_release(d, 40 * MB);
    dm_big_release(f, 50 * MB); /* kept: f, then d; e dropped */
    void *g = use(40 * MB);
    check("latest-that-serves-first", g == f, "not the latest kept buffer that serves the size");
    void *h = use(36 * MB);
    check("second-kept-reused", h == d, "not the other kept buffer");
    dm_big_release(g, 40 * MB); /* as asked: a kept size never above the real one */
    dm_big_release(h, 36 * MB);
    dm_big_keep(0); /* both freed */
    return failures ? 1 : 0;
}
