/* tests/unit: open-addressing state set for the model checks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/unit_stateset.h"

int unit_stateset_init(struct unit_stateset *s, size_t key_len, size_t max)
{
	size_t n = 1;

	while (n < 2 * max)
		n <<= 1;
	*s = (struct unit_stateset){ .key_len = key_len, .max = max, .nslots = n };
	s->keys = malloc(key_len * max);
	s->slots = calloc(n, sizeof(*s->slots));
	if (!s->keys || !s->slots) {
		unit_stateset_free(s);
		return -ENOMEM;
	}
	return 0;
}

void unit_stateset_free(struct unit_stateset *s)
{
	free(s->keys);
	free(s->slots);
	s->keys = NULL;
	s->slots = NULL;
}

/* FNV-1a: plenty for a test's hash table. */
static size_t unit_hash(const uint8_t *k, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ k[i]) * 0x100000001b3ull;
	return (size_t)h;
}

static size_t unit_probe(const struct unit_stateset *s, const void *key)
{
	size_t i = unit_hash(key, s->key_len) & (s->nslots - 1);

	while (s->slots[i] && memcmp(unit_stateset_get(s, s->slots[i] - 1), key, s->key_len) != 0)
		i = (i + 1) & (s->nslots - 1);
	return i;
}

long unit_stateset_find(const struct unit_stateset *s, const void *key)
{
	size_t i = unit_probe(s, key);

	return s->slots[i] ? (long)s->slots[i] - 1 : -1;
}

long unit_stateset_add(struct unit_stateset *s, const void *key, bool *added)
{
	size_t i = unit_probe(s, key);

	*added = false;
	if (s->slots[i])
		return (long)s->slots[i] - 1;
	if (s->count == s->max)
		return -1;
	memcpy(s->keys + s->count * s->key_len, key, s->key_len);
	s->slots[i] = (uint32_t)++s->count;
	*added = true;
	return (long)s->count - 1;
}
