/* core — per-connection records in the stats file: claimed, updated, released by the process. */
#include <sched.h>
#include <string.h>

#include "core/san_fdtable.h"
#include "core/san_owner.h"
#include "core/san_stats_conn.h"

#define SLOT_MASK (SAN_STATS_CONNS - 1u)
_Static_assert((SAN_STATS_CONNS & SLOT_MASK) == 0, "SAN_STATS_CONNS is a power of two");

/*
 * Which fd each slot belongs to (fd + 1; 0: free), in private memory: the process decides what
 * is its own from here, never from the shared file, which another process of the same user
 * could write into. A claim takes a free entry by compare-and-swap, starting at fd's own
 * position, so that a lookup usually finds it at the first probe.
 */
static int slot_fd[SAN_STATS_CONNS];

/* The slot table of the live file (or of the private counters when there is no file). */
static struct san_stats_conn *slots(void)
{
	struct san_stats_file *f = (struct san_stats_file *)san_stats_current();

	return f ? f->conns : NULL;
}

/*
 * Writers take a slot by turning seq odd. They hold it for a few stores, so a wait is short;
 * it is bounded all the same (a signal handler's close may interrupt a writer of the same
 * slot in this thread): then the change is left out, the counts go on.
 */
static bool slot_lock(struct san_stats_conn *c)
{
	for (int i = 0; i < 1000; i++) {
		uint32_t s = __atomic_load_n(&c->seq, __ATOMIC_RELAXED);

		if (!(s & 1) && __atomic_compare_exchange_n(&c->seq, &s, s + 1, false,
							    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			/* the record's stores must not be seen before the odd seq */
			__atomic_thread_fence(__ATOMIC_RELEASE);
			return true;
		}
		if (i > 100)
			sched_yield();
	}
	return false;
}

static void slot_unlock(struct san_stats_conn *c)
{
	__atomic_add_fetch(&c->seq, 1, __ATOMIC_RELEASE);
}

static int slot_find(int fd)
{
	struct san_fd *f = san_fd_slot(fd);
	unsigned int i;

	if (!f || !(san_fd_flags(f) & SAN_FDF_STATSLOT))
		return -1;
	if (__atomic_load_n(&slot_fd[(unsigned int)fd & SLOT_MASK], __ATOMIC_RELAXED) == fd + 1)
		return (int)((unsigned int)fd & SLOT_MASK);
	for (i = 0; i < SAN_STATS_CONNS; i++)
		if (__atomic_load_n(&slot_fd[i], __ATOMIC_RELAXED) == fd + 1)
			return (int)i;
	return -1;
}

struct san_stats_conn *san_stats_conn_claim(int fd, enum san_stats_role role)
{
	struct san_stats_file *f;
	struct san_stats_conn *c;
	unsigned int k, i = 0;

	if (!san_stats_enabled() || fd < 0)
		return NULL;
	f = san_stats_live_file();
	for (k = 0; k < SAN_STATS_CONNS; k++) {
		int free_ = 0;

		i = ((unsigned int)fd + k) & SLOT_MASK;
		if (!__atomic_load_n(&slot_fd[i], __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&slot_fd[i], &free_, fd + 1, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
	}
	c = &f->conns[i];
	if (k == SAN_STATS_CONNS || !slot_lock(c)) {
		if (k < SAN_STATS_CONNS)
			__atomic_store_n(&slot_fd[i], 0, __ATOMIC_RELEASE);
		__atomic_fetch_add(&f->hdr.conn_overflow, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	c->gen++;
	c->fd = fd;
	c->state = SAN_CS_CANDIDATE;
	c->role = (uint8_t)role;
	c->prov = SAN_CP_TCP;
	c->addr_known = 0;
	c->reason = 0;
	c->local_port = c->peer_port = 0;
	memset(c->local_addr, 0, sizeof(c->local_addr));
	memset(c->peer_addr, 0, sizeof(c->peer_addr));
	__atomic_store_n(&c->san_tx, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->san_rx, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->tcp_tx, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->tcp_rx, 0, __ATOMIC_RELAXED);
	slot_unlock(c);
	san_fd_set_flags(fd, SAN_FDF_STATSLOT, 0);
	return c;
}

struct san_stats_conn *san_stats_conn_of(int fd)
{
	struct san_stats_conn *t = slots();
	int i = t ? slot_find(fd) : -1;

	return i >= 0 ? &t[i] : NULL;
}

void san_stats_conn_rekey(int fd, int nfd)
{
	struct san_stats_conn *t = slots();
	int i = t ? slot_find(fd) : -1;

	if (i < 0)
		return;
	if (slot_lock(&t[i])) {
		t[i].fd = nfd;
		slot_unlock(&t[i]);
	}
	__atomic_store_n(&slot_fd[i], nfd + 1, __ATOMIC_RELEASE);
	san_fd_set_flags(nfd, SAN_FDF_STATSLOT, 0);
}

static void slot_free(struct san_stats_conn *t, int i)
{
	/* (a writer that could not be waited for: the slot shows free with its seq still odd
	 * only if that writer never finishes; the reader leaves odd slots out) */
	if (slot_lock(&t[i])) {
		t[i].state = SAN_CS_FREE;
		t[i].fd = -1;
		slot_unlock(&t[i]);
	}
	__atomic_store_n(&slot_fd[i], 0, __ATOMIC_RELEASE);
}

void san_stats_conn_release(int fd)
{
	struct san_stats_conn *t = slots();
	int i = t ? slot_find(fd) : -1;

	if (i < 0)
		return;
	slot_free(t, i);
	san_fd_set_flags(fd, 0, SAN_FDF_STATSLOT);
}

void san_stats_conn_set(struct san_stats_conn *c, enum san_stats_cstate state, int prov,
			unsigned int reason)
{
	if (!c || !slot_lock(c))
		return;
	c->state = (uint8_t)state;
	if (prov != SAN_CONN_KEEP)
		c->prov = (uint8_t)prov;
	if (reason)
		c->reason = (uint16_t)reason;
	slot_unlock(c);
}

void san_stats_conn_set_addrs(struct san_stats_conn *c, const struct san_tuple *t,
			      unsigned int known)
{
	if (!c || !known || !slot_lock(c))
		return;
	if (known & SAN_CA_LOCAL) {
		memcpy(c->local_addr, t->local.addr, sizeof(c->local_addr));
		c->local_port = t->local.port;
	}
	if (known & SAN_CA_PEER) {
		memcpy(c->peer_addr, t->peer.addr, sizeof(c->peer_addr));
		c->peer_port = t->peer.port;
	}
	c->addr_known |= (uint8_t)known;
	slot_unlock(c);
}

void san_stats_conn_forget(void)
{
	memset(slot_fd, 0, sizeof(slot_fd));
}

void san_stats_conn_clear_file(struct san_stats_file *f)
{
	for (unsigned int i = 0; i < SAN_STATS_CONNS; i++) {
		struct san_stats_conn *c = &f->conns[i];

		/* no writer of ours yet; one of the old image's that never finished is odd */
		uint32_t s = __atomic_load_n(&c->seq, __ATOMIC_RELAXED) | 1;

		__atomic_store_n(&c->seq, s, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		c->state = SAN_CS_FREE;
		c->fd = -1;
		__atomic_store_n(&c->seq, s + 1, __ATOMIC_RELEASE);
	}
	san_stats_conn_forget();
}
