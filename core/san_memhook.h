/* core — the process's registration caches, told when the application's memory changes. */
#ifndef SAN_MEMHOOK_H
#define SAN_MEMHOOK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/san_regcache.h"

/*
 * The preload's memory wrappers (preload/san_mem.c: free, realloc, munmap, mremap, madvise,
 * mmap with MAP_FIXED) call san_memhook_invalidate with the range whose pages changed or may
 * change; it passes the range to every registration cache of the process (the verbs provider
 * makes one per connection, each with its own protection domain). docs/verbs-registration.md
 * §3 says which calls and why.
 *
 * The fast path, no registration alive anywhere (every process that never READs into its own
 * buffers over verbs, and one that does between two such READs once its caches are empty):
 * one relaxed load of a count the caches' register callbacks keep (san_memhook_pinned). Why
 * relaxed suffices is the regcache's own argument: the count goes up before the pages are
 * pinned, and what must be seen is a registration pinned before the change the caller reports.
 *
 * Caches are found through a list under a reader-writer lock: invalidate reads (the cache's
 * deregister callbacks may free() and re-enter: glibc's default rwlock lets one thread take
 * the read lock again), add and del write. A cache's owner dels it before destroying it; after
 * del returns no invalidate is still inside it.
 *
 * fork: a handler registered when the library loads (so before most others, and child
 * handlers run in registration order) makes the child forget every cache before anything in
 * it can free() into one: their registrations, and maybe their locks, are the parent's.
 */

/* 0, or -ENOMEM (then the cache must not be used for registrations: nobody would invalidate). */
int san_memhook_add(struct san_regcache *rc);
/* Remove rc (added or not); no invalidate runs in it once this returns. */
void san_memhook_del(struct san_regcache *rc);

/*
 * Registrations alive (or being made) in the caches: +1 before a register callback pins
 * anything, -1 after a failed one or a deregistration.
 */
void san_memhook_pinned(int delta);

/* Some registration may be alive (the wrappers then look up the range: malloc_usable_size). */
bool san_memhook_active(void);

/* The pages of [addr, addr + len) changed or may change: tell every cache. */
void san_memhook_invalidate(const void *addr, size_t len);

/*
 * The calling thread may receive into its own stack: report the stack when the thread exits.
 * glibc keeps exited threads' stacks for new threads and discards their pages with its own,
 * unseen madvise: a registration of a stack buffer would outlive its pages. Cheap after the
 * first call on a thread; nothing for the main thread (its stack ends with the process).
 * false: the stack could not be watched (no key, no attributes): register none of this
 * thread's memory.
 */
bool san_memhook_watch_stack(void);

#endif /* SAN_MEMHOOK_H */
