/*
 * core — a wait that watches switched connections' rings itself, in user space.
 *
 * A switched fd is its notification socket X, readable while its ring holds something because
 * the peer rings X when it commits to a ring whose consumer has armed (core/san_shm_ring.h).
 * A request/response server paid for that on every request: the peer's doorbell (a send), our
 * drain of it (two receives), and the wait's own polls of the kernel. A wait that spins
 * instead takes the flag down for the connections it watches (the peer then commits without
 * a doorbell), looks at their rings, and puts the flag back up before it sleeps or leaves,
 * so a wait the preload cannot see misses nothing for longer than one spin. A ring found
 * holding data is reported by the wait itself and left unarmed, quiet (s->rx_quiet), until
 * the application reads it; a wait through the preload that is about to sleep first rings X
 * for every quiet connection (san_rxwatch_announce), so that the kernel sees them too.
 *
 * Only shm connections, switched both ways, whose consumer does not want a doorbell per
 * commit (no EPOLLET registration): the others keep the kernel's path.
 */
#ifndef SAN_RXWATCH_H
#define SAN_RXWATCH_H

#include <stdbool.h>

struct san_sock;

struct san_rxwatch {
	struct san_sock *s; /* with a reference while watched */
	const void *prod;   /* the ring's producer index, read without the lock (a hint) */
	const void *rd;	    /* our read cursor, likewise */
	bool up;	    /* the flag is back up (san_rxwatch_arm) */
};

/*
 * Start watching fd: false if it cannot be watched so (the caller keeps the kernel's path for
 * it). true: *ready says whether the ring holds something now; if not, the flag is down.
 */
bool san_rxwatch_begin(struct san_rxwatch *w, int fd, bool *ready);

/* Something in the ring: a look without the lock, then one under it. */
bool san_rxwatch_ready(struct san_rxwatch *w);

/*
 * Stop watching. reported: the wait returns this fd as readable (the ring holds data: it is
 * left unarmed, quiet). Otherwise the flag goes back up; data found meanwhile rings X.
 */
void san_rxwatch_end(struct san_rxwatch *w, bool reported);

/*
 * About to sleep: the flag back up. true: data came meanwhile (the flag left down, report it,
 * then san_rxwatch_end(w, true)); false: armed (san_rxwatch_end(w, false) only lets go).
 */
bool san_rxwatch_arm(struct san_rxwatch *w);

/* The peer last committed on the CPU this thread runs on (a spin would keep it waiting). */
bool san_rxwatch_peer_here(const struct san_rxwatch *w, int cpu);

/* A wait through the preload is about to sleep in the kernel: X rung for quiet connections. */
void san_rxwatch_announce(void);
static inline bool san_rxwatch_any_quiet(void)
{
	extern int san_rxwatch_nquiet;

	return __atomic_load_n(&san_rxwatch_nquiet, __ATOMIC_RELAXED) != 0;
}

/*
 * A receive that read the ring empty (or short), its flag down: left quiet instead of armed
 * (true), so that the peer's next frame, likely read by our next wait's spin, comes without a
 * doorbell. false: arm as usual (a connection not watched so, or its flag up). Lock held.
 */
bool san_rxwatch_defer(struct san_sock *s);

/*
 * Armed if quiet, and off this process's count: before a fork copies or shares s
 * (san_sock_atfork_prepare: a connection the fork shares must not stay quiet, the other
 * process's waits and tick would never arm it, and the child's count starts at 0), and when
 * this process's close lets go of it (another process may go on with it; the count must not
 * keep the tick running for a connection no announce here will find). Lock held.
 */
void san_rxwatch_unquiet(struct san_sock *s);

/*
 * A successful epoll_ctl MOD or DEL of fd. Sets that existed at a fork are the family's: a
 * process's copy of one (core/san_epshadow.h) does not see another's changes. The child does
 * not use its copies; the parent keeps its own (a forking server's, redis' BGSAVE), and only
 * connections the fork shared can be in both, so one changed while shared is never watched
 * again: its readiness comes from the kernel.
 */
void san_rxwatch_epoll_ctl(int fd);

/* A fork child: the tick is the parent's. */
void san_rxwatch_atfork_child(void);

/* The sock's quiet state ends (an arm, X rung). Lock held. */
void san_rxwatch_quiet_end(struct san_sock *s);

#endif
