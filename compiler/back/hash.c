/* 64-bit FNV-1a: the hash of model sources and generated code in metadata and cache keys.
 * seed 0 starts from the standard offset basis; a previous hash as seed continues it, so
 * several buffers can be hashed as one. */
#include "compiler.h"

#include <string.h>

unsigned long long dm_hash64(const void *data, size_t len, unsigned long long seed)
{
    const unsigned char *bytes = data;
    unsigned long long h = seed ? seed : 0xcbf29ce484222325ULL; /* FNV offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= bytes[i];
        h *= 0x100000001b3ULL; /* FNV prime */
    }
    return h;
}

unsigned long long dm_model_source_hash(const dm_model *m)
{
    unsigned long long h =
        dm_hash64(m->source ? m->source : "", m->source ? strlen(m->source) : 0, 0);
    for (int i = 1; i < m->sources.n; i++)
        h = dm_hash64(m->sources.items[i]->text, m->sources.items[i]->len, h);
    return h;
}
