/* core — verbs registration cache: buffers registered once, forgotten when their memory changes. */
#ifndef SAN_REGCACHE_H
#define SAN_REGCACHE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Zero-copy RDMA READ/WRITE needs the application's buffer registered (ibv_reg_mr pins its
 * pages), and a registration costs tens of microseconds: the verbs provider keeps them here and
 * reuses them. A cached registration must never serve a range whose pages changed since it was
 * made (freed and unmapped, remapped, discarded...): it would still name the old pages and the
 * peer would read or write stale memory without any error. So the preload reports every such
 * change (san_regcache_invalidate) and the cache drops what overlaps it at once.
 *
 * This file knows nothing of libibverbs: registering and deregistering are the caller's
 * callbacks (the provider wraps ibv_reg_mr/ibv_dereg_mr, the unit tests pass fakes). The design,
 * and what the cache cannot see: docs/verbs-registration.md.
 *
 * Thread-safe (one mutex). The callbacks are never called with the mutex held, so they may
 * free() or munmap() and re-enter san_regcache_invalidate through the preload's wrappers. No
 * function here allocates memory after san_regcache_create, so they may run inside the
 * preload's malloc/free wrappers.
 */

/* What the register callback made; opaque to the cache, handed back to the deregister one. */
struct san_reg {
	void *mr;      /* the provider's handle (struct ibv_mr *) */
	uint32_t lkey; /* for local work requests */
	uint32_t rkey; /* for the peer's RDMA READ/WRITE */
};

struct san_regcache_ops {
	/*
	 * Register [addr, addr + len) (page-aligned) with the access bits asked of the lookup
	 * (opaque to the cache: the provider's IBV_ACCESS_* set). Fill *out, return 0 or a
	 * negative errno (-ENOMEM, -EPERM, -EFAULT...), which the lookup returns.
	 */
	int (*reg)(void *ctx, void *addr, size_t len, unsigned int access, struct san_reg *out);
	/* Undo one successful reg. Called exactly once per registration, never in a fork child. */
	void (*dereg)(void *ctx, const struct san_reg *reg);
	void *ctx;
};

struct san_regcache_limits {
	uint32_t max_entries; /* registrations alive at once (cached, in use, in progress); >= 1 */
	uint64_t max_bytes;   /* bytes they cover (the provider: RLIMIT_MEMLOCK minus its pools) */
	size_t page_size;     /* a power of two; 0: the system's */
};

/* A snapshot (san_regcache_get_stats). */
struct san_regcache_stats {
	uint64_t hits;		   /* lookups served by a cached registration */
	uint64_t misses;	   /* lookups that found none (then registered, or failed) */
	uint64_t evictions;	   /* unused registrations dropped to make room */
	uint64_t invalidations;	   /* registrations an invalidate took (or kept) out */
	uint64_t reg_failures;	   /* register callbacks that failed */
	uint64_t limit_failures;   /* lookups refused: the limits could not be met */
	uint64_t entries;	   /* registrations a lookup can find now */
	uint64_t registrations;	   /* alive: cached, in use after invalidation, in progress */
	uint64_t registered_bytes; /* what the registrations alive cover */
};

/*
 * One registration, as the lookup returns it. Read-only for the caller, and valid only while
 * it holds the reference (until san_regcache_release).
 */
struct san_regcache_entry {
	uintptr_t start, end; /* the registered range [start, end), page-aligned */
	unsigned int access;  /* the access bits it was registered with */
	struct san_reg reg;
};

struct san_regcache;

/* 0, -EINVAL (no callbacks, max_entries 0, page size not a power of two), -ENOMEM. */
int san_regcache_create(const struct san_regcache_ops *ops, const struct san_regcache_limits *lim,
			struct san_regcache **out);

/*
 * Deregister everything and free the cache. No reference may be held and no other call may be
 * in progress (the provider calls it when its protection domain goes away).
 */
void san_regcache_destroy(struct san_regcache *rc);

/*
 * A registration covering [addr, addr + len) with at least the access bits asked, with a
 * reference taken: a cached one, or a new one of the enclosing pages. Returns 0 and sets *out,
 * or a negative errno and leaves *out alone:
 *   -EINVAL  len 0, or the range wraps around the address space;
 *   -E2BIG   the range's pages alone exceed the limits: it can never be registered here;
 *   -ENOMEM  registrations in use hold the room it needs (it may work later);
 *   the register callback's error, the cache as it was (bar the entries evicted for room).
 */
int san_regcache_lookup(struct san_regcache *rc, const void *addr, size_t len, unsigned int access,
			struct san_regcache_entry **out);

/*
 * Drop the reference a lookup took. The last reference of a registration that was invalidated
 * deregisters it (in this call, without the lock). Returns 0, or -EINVAL for an entry that
 * holds no reference (a double release).
 */
int san_regcache_release(struct san_regcache *rc, struct san_regcache_entry *e);

/*
 * The pages overlapping [addr, addr + len) changed or may change (free, munmap, mremap,
 * madvise, brk, shmdt...): no lookup that starts after this returns will be served by a
 * registration made before this started. Unused registrations are deregistered here (without
 * the lock); one in use lives until its last release. One relaxed load when the cache holds
 * nothing.
 */
void san_regcache_invalidate(struct san_regcache *rc, const void *addr, size_t len);

void san_regcache_get_stats(struct san_regcache *rc, struct san_regcache_stats *out);

/*
 * fork. prepare/parent take and give back the lock around fork() (pthread_atfork), so the
 * child's copy is consistent. In the child, san_regcache_fork_child drops every registration
 * without deregistering it (they belong to the parent's device context) and leaves the cache
 * empty; an entry that was referenced at fork stays reserved until released there, then
 * goes without a callback.
 */
void san_regcache_fork_prepare(struct san_regcache *rc);
void san_regcache_fork_parent(struct san_regcache *rc);
void san_regcache_fork_child(struct san_regcache *rc);

#endif /* SAN_REGCACHE_H */
