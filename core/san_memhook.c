/* core — the process's registration caches, told when the application's memory changes. */
#include "core/san_memhook.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

struct hook {
	struct san_regcache *rc;
	struct hook *next;
};

static pthread_rwlock_t hooks_lock = PTHREAD_RWLOCK_INITIALIZER; /* reader-preferring (glibc) */
static struct hook *hooks;
static atomic_long npinned; /* registrations alive or in the making: the fast path reads this */

int san_memhook_add(struct san_regcache *rc)
{
	struct hook *h = malloc(sizeof(*h)); /* (not under the lock: malloc may call free) */

	if (!h)
		return -ENOMEM;
	h->rc = rc;
	pthread_rwlock_wrlock(&hooks_lock);
	h->next = hooks;
	hooks = h;
	pthread_rwlock_unlock(&hooks_lock);
	return 0;
}

void san_memhook_del(struct san_regcache *rc)
{
	struct hook **pp, *gone = NULL;

	pthread_rwlock_wrlock(&hooks_lock);
	for (pp = &hooks; *pp; pp = &(*pp)->next)
		if ((*pp)->rc == rc) {
			gone = *pp;
			*pp = gone->next;
			break;
		}
	pthread_rwlock_unlock(&hooks_lock);
	free(gone); /* after the unlock: our free() wrapper takes the read lock */
}

void san_memhook_pinned(int delta)
{
	atomic_fetch_add(&npinned, delta);
}

bool san_memhook_active(void)
{
	return atomic_load_explicit(&npinned, memory_order_relaxed) > 0;
}

void san_memhook_invalidate(const void *addr, size_t len)
{
	if (!len || !san_memhook_active())
		return;
	pthread_rwlock_rdlock(&hooks_lock);
	for (struct hook *h = hooks; h; h = h->next)
		san_regcache_invalidate(h->rc, addr, len);
	pthread_rwlock_unlock(&hooks_lock);
}

/* ---- thread stacks ---- */

static pthread_key_t stack_key;
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;
static bool stack_key_ok;
static __thread uintptr_t stack_lo, stack_hi;

/* A key's destructor runs at thread exit before glibc caches (or unmaps) the stack. */
static void stack_gone(void *unused)
{
	(void)unused;
	san_memhook_invalidate((const void *)stack_lo, stack_hi - stack_lo);
}

static void stack_key_init(void)
{
	stack_key_ok = pthread_key_create(&stack_key, stack_gone) == 0;
}

bool san_memhook_watch_stack(void)
{
	static __thread int8_t state; /* 0: not looked yet; 1: watched (or main); -1: cannot */
	pthread_attr_t attr;
	void *lo;
	size_t len;

	if (state)
		return state > 0;
	state = -1;
	if (syscall(SYS_gettid) == getpid()) {
		state = 1; /* the main thread: its stack is never handed to another thread */
		return true;
	}
	pthread_once(&stack_once, stack_key_init);
	if (!stack_key_ok || pthread_getattr_np(pthread_self(), &attr))
		return false;
	if (!pthread_attr_getstack(&attr, &lo, &len)) {
		stack_lo = (uintptr_t)lo;
		stack_hi = stack_lo + len;
		/* non-NULL: the destructor runs */
		if (!pthread_setspecific(stack_key, (void *)1))
			state = 1;
	}
	pthread_attr_destroy(&attr);
	return state > 0;
}

/* ---- fork ---- */

static void memhook_atfork_child(void)
{
	/* (the lock may have been held by a thread that does not exist here: a new one) */
	pthread_rwlock_init(&hooks_lock, NULL);
	hooks = NULL; /* the list's nodes are leaked with the caches: they are the parent's */
	atomic_store(&npinned, 0);
}

/* At load, ahead of the program's handlers and of the library's own initialization. */
__attribute__((constructor(101))) static void memhook_init(void)
{
	(void)pthread_atfork(NULL, NULL, memhook_atfork_child);
}
