/* core — fixed-size slots in shared anonymous memory that a fork() child shares with its parent. */
#ifndef SAN_SLAB_H
#define SAN_SLAB_H

#include <stddef.h>
#include <stdint.h>

/*
 * A slab hands out zeroed slots of one size from chunks of SAN_SLAB_SLOTS, each chunk a
 * MAP_SHARED | MAP_ANONYMOUS mapping (docs/engine.md §7.1). After a fork() parent and child see
 * the same bytes in every chunk that existed at the fork, so an object in a slot can be one
 * state held by both processes; chunks mapped later are the mapping process's alone (and its
 * later children's). A chunk's free-slot bitmap lives in the chunk and is taken with atomics:
 * two processes that inherited a chunk never hand out one slot twice. Chunks are never unmapped.
 * Slots are 64-byte aligned. Thread-safe; no lock, no system call but a new chunk's mmap.
 */
#define SAN_SLAB_SLOTS 64

struct san_slab_chunk;

struct san_slab {
	size_t size;			/* a slot's object size (set before the first use) */
	struct san_slab_chunk *chunks;	/* the chunks this process knows (newest first) */
};

/* A zeroed slot, or NULL (no memory). */
void *san_slab_alloc(struct san_slab *sl);
/* The slot goes back (any process that shares its chunk may take it next). p may be NULL. */
void san_slab_free(struct san_slab *sl, void *p);
/*
 * From now on new slots come from chunks this process maps itself (a fork child, before it takes
 * any): the inherited chunks' bitmaps are shared, and a slot the child never frees (it exits
 * without a close) would stay taken for its parent. Slots it frees still go back to their chunk.
 */
void san_slab_forget(struct san_slab *sl);
/* Chunks this process knows (for tests). */
unsigned int san_slab_chunks(const struct san_slab *sl);

#endif /* SAN_SLAB_H */
