/* 64-bit FNV-1a: the hash of model sources and generated code in metadata and cache keys.
 * seed 0 starts from the standard offset basis; a previous hash as seed continues it, so
 * several buffers can be hashed as one. */
#include "compiler.h"

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
