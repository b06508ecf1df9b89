/* proto: the ring-frame hash — XXH64, written here from its published specification. */
#ifndef SAN_HASH_H
#define SAN_HASH_H

#include <stddef.h>
#include <stdint.h>

/*
 * XXH64 (xxHash, 64-bit variant, as specified in xxhash_spec.md, "XXH64 Algorithm
 * Description"), input read as little-endian 64/32-bit lanes whatever the host. Chosen for
 * the ring trailer because it is fully specified with public test vectors, needs no tables or
 * CPU features, and runs at several bytes per cycle (FNV-1a manages about one byte per
 * multiply). It detects torn and stale frames; it is not a MAC and defends against no one.
 */
uint64_t san_xxh64(const void *data, size_t len, uint64_t seed);

#endif /* SAN_HASH_H */
