/* preload — wrappers: memory whose pages change (free, realloc, munmap, mremap, madvise, mmap). */
#include "preload/san_preload.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "core/san_memhook.h"

/*
 * A registration of the application's memory names the physical pages it had when it was
 * made; these wrappers report every change of those pages the dynamic linker lets us see, so
 * that the verbs provider's registration caches drop what it would make stale
 * (docs/verbs-registration.md §3). While no cache exists each costs one relaxed load.
 *
 * They must not use the san_real table: its first use initializes the library (configuration,
 * log, statistics), which allocates and frees, and free() is called long before that, by the
 * dynamic linker and libc themselves. Each real function is looked up on first use with
 * dlsym(RTLD_NEXT); dlsym may itself allocate and free, so a lookup already running on this
 * thread is not entered again: a free() then leaks its (tiny, one-time) block, and the
 * mapping calls go to the kernel directly.
 *
 * The range is reported before the real call and again after it: before, so no lookup can hit
 * an old registration in the instant after the pages changed; after, for a registration that
 * another thread made of the old pages in the meantime. The errno the real call left is the
 * caller's (the report may change it: deregistration calls into rdma-core).
 */

/* Report [addr, addr + len), leaving errno as it was (before the call, or as the call left it). */
static void report(const void *addr, size_t len)
{
	int e = errno;

	san_memhook_invalidate(addr, len);
	errno = e;
}

static __thread int resolving __attribute__((tls_model("initial-exec")));

static void *mem_real(void *_Atomic *slot, const char *name)
{
	void *fn = atomic_load_explicit(slot, memory_order_acquire);

	if (fn || resolving)
		return fn;
	resolving = 1;
	fn = dlsym(RTLD_NEXT, name);
	resolving = 0;
	if (fn)
		atomic_store_explicit(slot, fn, memory_order_release);
	return fn;
}

#define MEM_REAL(type, name)                          \
	({                                            \
		static void *_Atomic slot_##name;     \
		(type) mem_real(&slot_##name, #name); \
	})

/* Heap memory: the allocator unmaps, trims and discards with its own, unseen system calls. */

SAN_EXPORT void free(void *p)
{
	void (*fn)(void *) = MEM_REAL(void (*)(void *), free);
	size_t n;

	if (!fn)
		return; /* inside our own dlsym: leak this block rather than guess its owner */
	if (!p || !san_memhook_active()) {
		fn(p);
		return;
	}
	n = malloc_usable_size(p);
	report(p, n);
	fn(p);
	report(p, n); /* (free keeps errno: glibc since 2.33, POSIX 2024) */
}

/* The old block changes whether the block moves, shrinks in place or is freed (size 0). */
SAN_EXPORT void *realloc(void *p, size_t size)
{
	void *(*fn)(void *, size_t) = MEM_REAL(void *(*)(void *, size_t), realloc);
	size_t n;
	void *q;

	if (!fn) {
		errno = ENOMEM;
		return NULL;
	}
	if (!p || !san_memhook_active())
		return fn(p, size);
	n = malloc_usable_size(p);
	report(p, n);
	q = fn(p, size);
	report(p, n);
	return q;
}

/* (glibc's reallocarray calls its realloc internally, unseen by the wrapper above) */
SAN_EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(nmemb, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, total);
}

/* Mappings. */

SAN_EXPORT int munmap(void *addr, size_t len)
{
	int (*fn)(void *, size_t) = MEM_REAL(int (*)(void *, size_t), munmap);
	int r;

	report(addr, len);
	r = fn ? fn(addr, len) : (int)syscall(SYS_munmap, addr, len);
	report(addr, len);
	return r;
}

SAN_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *(*fn)(void *, size_t, size_t, int, ...) =
		MEM_REAL(void *(*)(void *, size_t, size_t, int, ...), mremap);
	void *want = NULL, *r;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	report(old, old_len);
	if (want)
		report(want, new_len); /* whatever was mapped there is replaced */
	if (fn)
		r = fn(old, old_len, new_len, flags, want);
	else
		r = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
	report(old, old_len);
	if (want)
		report(want, new_len);
	return r;
}

#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

/*
 * Advice known to leave the pages where they are: everything else (DONTNEED, FREE, REMOVE,
 * advice newer than this list...) is reported. MADV_DONTFORK above all must not be: rdma-core
 * may give it to every range it registers.
 */
static bool discards(int advice)
{
	switch (advice) {
	case MADV_NORMAL:
	case MADV_RANDOM:
	case MADV_SEQUENTIAL:
	case MADV_WILLNEED:
	case MADV_DONTFORK:
	case MADV_DOFORK:
	case MADV_HUGEPAGE:
	case MADV_NOHUGEPAGE:
	case MADV_DONTDUMP:
	case MADV_DODUMP:
	case MADV_WIPEONFORK:
	case MADV_KEEPONFORK:
	case MADV_COLD:
	case MADV_POPULATE_READ:
	case MADV_POPULATE_WRITE:
		return false;
	default:
		return true;
	}
}

SAN_EXPORT int madvise(void *addr, size_t len, int advice)
{
	int (*fn)(void *, size_t, int) = MEM_REAL(int (*)(void *, size_t, int), madvise);
	bool d = discards(advice);
	int r;

	if (d)
		report(addr, len);
	r = fn ? fn(addr, len, advice) : (int)syscall(SYS_madvise, addr, len, advice);
	if (d)
		report(addr, len);
	return r;
}

/* MAP_FIXED replaces whatever was mapped at addr. */
static void *mem_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off,
		      void *(*fn)(void *, size_t, int, int, int, off_t))
{
	bool fixed = (flags & MAP_FIXED) && addr;
	void *r;

	if (fixed)
		report(addr, len);
	r = fn ? fn(addr, len, prot, flags, fd, off)
	       : (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (fixed)
		report(addr, len);
	return r;
}

SAN_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mem_mmap(addr, len, prot, flags, fd, off,
			MEM_REAL(void *(*)(void *, size_t, int, int, int, off_t), mmap));
}

SAN_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mem_mmap(addr, len, prot, flags, fd, off,
			MEM_REAL(void *(*)(void *, size_t, int, int, int, off_t), mmap64));
}
