/* tests/unit: a seeded pseudo-random sequence for model and random-walk tests. */
#ifndef UNIT_RAND_H
#define UNIT_RAND_H

#include <stdint.h>

/* splitmix64: the same seed gives the same walk, so a failing run can be replayed. */
static inline uint64_t unit_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif /* UNIT_RAND_H */
