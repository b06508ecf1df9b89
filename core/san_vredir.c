/*
 * core — the fork family's table of connections served by an rdma_cm listener of their own
 * (san_vredir.h). Each entry: a state word (FREE, then BUSY while one process fills it, then
 * LIVE), the owner's pid, the connection's two ends and the port.
 */
#include "core/san_vredir.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

enum { E_FREE, E_BUSY, E_LIVE };

struct vredir_entry {
	uint32_t state; /* atomics */
	int32_t pid;
	struct san_addr local, peer;
	uint16_t port;
};

static struct vredir_entry *table; /* MAP_SHARED: a fork child sees the same entries */

int san_vredir_init(void)
{
	void *m;

	if (__atomic_load_n(&table, __ATOMIC_ACQUIRE))
		return 0;
	m = mmap(NULL, SAN_VREDIR_MAX * sizeof(*table), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	{
		struct vredir_entry *none = NULL;

		if (!__atomic_compare_exchange_n(&table, &none, m, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			munmap(m, SAN_VREDIR_MAX * sizeof(*table)); /* another thread's came first */
	}
	return 0;
}

bool san_vredir_ready(void)
{
	return __atomic_load_n(&table, __ATOMIC_ACQUIRE) != NULL;
}

static bool gone(int32_t pid)
{
	int e = errno;
	bool r = kill(pid, 0) < 0 && errno == ESRCH;

	errno = e;
	return r;
}

/* Take entry e if it is free, or a LIVE one whose process is gone. */
static bool claim(struct vredir_entry *e)
{
	uint32_t st = E_FREE;

	if (__atomic_compare_exchange_n(&e->state, &st, E_BUSY, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return true;
	return st == E_LIVE && gone(__atomic_load_n(&e->pid, __ATOMIC_RELAXED)) &&
	       __atomic_compare_exchange_n(&e->state, &st, E_BUSY, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

int san_vredir_put(const struct san_tuple *t, uint16_t port)
{
	struct vredir_entry *tb = __atomic_load_n(&table, __ATOMIC_ACQUIRE);

	if (!tb)
		return -ENODEV;
	san_vredir_drop(t); /* (an older entry of ours for the same ends) */
	for (int i = 0; i < SAN_VREDIR_MAX; i++) {
		struct vredir_entry *e = &tb[i];

		if (!claim(e))
			continue;
		e->pid = (int32_t)getpid();
		e->local = t->local;
		e->peer = t->peer;
		e->port = port;
		__atomic_store_n(&e->state, E_LIVE, __ATOMIC_RELEASE);
		return 0;
	}
	return -ENOSPC;
}

void san_vredir_drop(const struct san_tuple *t)
{
	struct vredir_entry *tb = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	int32_t me = (int32_t)getpid();

	for (int i = 0; tb && i < SAN_VREDIR_MAX; i++) {
		struct vredir_entry *e = &tb[i];
		uint32_t st = E_LIVE;

		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != E_LIVE || e->pid != me ||
		    !san_addr_eq(&e->local, &t->local) || !san_addr_eq(&e->peer, &t->peer))
			continue;
		(void)__atomic_compare_exchange_n(&e->state, &st, E_FREE, false, __ATOMIC_ACQ_REL,
						  __ATOMIC_RELAXED);
	}
}

uint16_t san_vredir_find(const struct san_tuple *t)
{
	struct vredir_entry *tb = __atomic_load_n(&table, __ATOMIC_ACQUIRE);

	for (int i = 0; tb && i < SAN_VREDIR_MAX; i++) {
		struct vredir_entry *e = &tb[i];
		uint16_t port;
		int32_t pid;

		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != E_LIVE)
			continue;
		pid = e->pid;
		port = e->port;
		if (!san_addr_eq(&e->local, &t->local) || !san_addr_eq(&e->peer, &t->peer) || gone(pid))
			continue;
		/* (still the same entry: it was not dropped and taken again while we read it) */
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == E_LIVE && e->pid == pid)
			return port;
	}
	return 0;
}
