/* core — fixed-size slots in shared anonymous memory (san_slab.h). */
#include "core/san_slab.h"

#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#define SLOT_ALIGN 64

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/*
 * LeakSanitizer scans globals, stacks and heap blocks for pointers, not our mappings: what a
 * slot points to (a sock's private part, in the heap) would look leaked. Chunks are roots.
 */
#define slab_lsan_root(p, len) __lsan_register_root_region((p), (len))
#else
#define slab_lsan_root(p, len) ((void)0)
#endif

/*
 * The chunk's header, then SAN_SLAB_SLOTS slots. Each slot starts with a word naming its chunk
 * (written once, when the chunk is made), the object SLOT_ALIGN bytes further on: a free finds
 * its chunk without a search. `next` is written before the chunk is published and never again,
 * so a child's list, inherited at the fork, stays valid whatever its parent adds later.
 */
struct san_slab_chunk {
	uint64_t used; /* bit i: slot i is taken, by whichever process of those sharing the chunk */
	struct san_slab_chunk *next;
	size_t stride;
	_Alignas(SLOT_ALIGN) unsigned char slots[];
};

static size_t stride_of(size_t size)
{
	return SLOT_ALIGN + (size + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
}

static void *slot_obj(struct san_slab_chunk *c, unsigned int i)
{
	return c->slots + (size_t)i * c->stride + SLOT_ALIGN;
}

/* Take a free slot of c, zeroed; NULL if it has none. */
static void *chunk_take(struct san_slab *sl, struct san_slab_chunk *c)
{
	uint64_t u = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);

	while (~u) {
		unsigned int i = (unsigned int)__builtin_ctzll(~u);

		if (__atomic_compare_exchange_n(&c->used, &u, u | (1ull << i), true,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			void *p = slot_obj(c, i);

			memset(p, 0, sl->size);
			return p;
		}
	}
	return NULL;
}

void *san_slab_alloc(struct san_slab *sl)
{
	struct san_slab_chunk *c, *head;
	size_t stride = stride_of(sl->size), len = sizeof(*c) + SAN_SLAB_SLOTS * stride;
	void *m, *p;

	for (c = __atomic_load_n(&sl->chunks, __ATOMIC_ACQUIRE); c; c = c->next)
		if ((p = chunk_take(sl, c)))
			return p;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	slab_lsan_root(m, len);
	c = m;
	c->stride = stride;
	for (unsigned int i = 0; i < SAN_SLAB_SLOTS; i++)
		*(struct san_slab_chunk **)(c->slots + (size_t)i * stride) = c;
	c->used = 1; /* slot 0 is this call's */
	head = __atomic_load_n(&sl->chunks, __ATOMIC_ACQUIRE);
	do
		c->next = head;
	while (!__atomic_compare_exchange_n(&sl->chunks, &head, c, true, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE));
	return slot_obj(c, 0);
}

void san_slab_free(struct san_slab *sl, void *p)
{
	struct san_slab_chunk *c;
	unsigned int i;

	(void)sl;
	if (!p)
		return;
	c = *(struct san_slab_chunk **)((unsigned char *)p - SLOT_ALIGN);
	i = (unsigned int)(((unsigned char *)p - SLOT_ALIGN - c->slots) / c->stride);
	__atomic_and_fetch(&c->used, ~(1ull << i), __ATOMIC_RELEASE);
}

void san_slab_forget(struct san_slab *sl)
{
	__atomic_store_n(&sl->chunks, NULL, __ATOMIC_RELEASE);
}

unsigned int san_slab_chunks(const struct san_slab *sl)
{
	unsigned int n = 0;

	for (const struct san_slab_chunk *c = sl->chunks; c; c = c->next)
		n++;
	return n;
}
