/* tests/unit: a set of fixed-size states for the exhaustive model checks (BFS order kept). */
#ifndef SAN_UNIT_STATESET_H
#define SAN_UNIT_STATESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct unit_stateset {
	size_t key_len;
	size_t max;	 /* states the set may hold */
	size_t count;	 /* states added so far; also the BFS queue tail */
	size_t nslots;	 /* hash slots, a power of two above 2 * max */
	uint8_t *keys;	 /* count keys of key_len bytes, in insertion order */
	uint32_t *slots; /* index + 1 into keys, 0 for empty */
};

/* Returns 0 or -ENOMEM. */
int unit_stateset_init(struct unit_stateset *s, size_t key_len, size_t max);
void unit_stateset_free(struct unit_stateset *s);

/* Index of key, adding it if new (*added tells); -1 if the set is full. */
long unit_stateset_add(struct unit_stateset *s, const void *key, bool *added);

/* Index of key or -1. */
long unit_stateset_find(const struct unit_stateset *s, const void *key);

static inline const void *unit_stateset_get(const struct unit_stateset *s, size_t i)
{
	return s->keys + i * s->key_len;
}

#endif /* SAN_UNIT_STATESET_H */
