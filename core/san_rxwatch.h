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
 * Only shm connections, switched both ways. One with an EPOLLET registration asks its peer for a
 * doorbell per commit (cons_edges), as TCP wakes an edge-triggered waiter at every arrival; it
 * is watched only where that registration is its only one: the watch takes that request down
 * too, reports the registration once the ring moved past where it last reported it (an edge),
 * and puts the request back up before it sleeps, as it does the flag. The others keep the
 * kernel's path.
 */
#ifndef SAN_RXWATCH_H
#define SAN_RXWATCH_H

#include <stdbool.h>
#include <stdint.h>

struct san_sock;

struct san_rxwatch {
	struct san_sock *s; /* with a reference while watched */
	const void *prod;   /* the ring's producer index, read without the lock (a hint) */
	const void *rd;	    /* our read cursor, likewise */
	bool up;	    /* the flag is back up (san_rxwatch_arm) */
	bool edge;	    /* for an edge-triggered registration: */
	uint64_t at;	    /* ... the producer index of the look that found it ready */
};

/* A count of epoll_ctl calls of managed fds, read before a look at the copy of the sets. */
uint32_t san_rxwatch_ctl_gen(void);

/*
 * Start watching fd: false if it cannot be watched so (the caller keeps the kernel's path for
 * it). true: *ready says whether the ring holds something now; if not, the flag is down.
 * edge: for an edge-triggered registration the caller found to be the fd's only one, in a look
 * at the sets made when san_rxwatch_ctl_gen() was gen (a connection that ever had a second
 * number is refused): it is ready only once the ring moved past where it was last reported
 * (s->edge_seen), and while it is watched or quiet the peer rings no doorbell per arrival
 * (cons_edges down). may_sleep: the wait has a timeout, and is the application's wait for the
 * connection, not a look in passing (san_sock_proc.wait_watched).
 */
bool san_rxwatch_begin(struct san_rxwatch *w, int fd, bool edge, uint32_t gen, bool may_sleep,
		       bool *ready);

/* Something in the ring (an edge: something new since seen): a look without the lock, then
 * one under it. */
bool san_rxwatch_ready(struct san_rxwatch *w);

/*
 * An edge-triggered watch's registration was reported, by the wait or by the kernel: seen up
 * to where the watch last looked. bells: the peer's doorbell count read before a look at the
 * kernel that came with the report (NULL: none), whose edges that look took.
 */
void san_rxwatch_edge_told(const struct san_rxwatch *w, const uint32_t *bells);

/*
 * The peer's doorbells so far (san_rxwatch_bells); whether any rang since the kernel's edges
 * were last taken with a report (san_rxwatch_edge_rang: an edge watch's report must then come
 * with a look at the kernel, whose edge for those doorbells would else come as a second report
 * of the same bytes).
 */
uint32_t san_rxwatch_bells(const struct san_rxwatch *w);
bool san_rxwatch_edge_rang(const struct san_rxwatch *w);

/* Its doorbell per commit back up if a watch took it down, with a full fence (the caller looks
 * at the ring after). Lock held. */
void san_rxwatch_edges_up(struct san_sock *s);

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
 * A receive that read the ring empty (or short): left quiet instead of armed (true), its flag
 * taken down if its own thread's ring-watching wait, or no known wait, had put it up
 * (san_sock_proc.rx_armer), so that the peer's next frame, likely read by our next wait's spin,
 * comes without a doorbell. false: arm again (a connection not watched so, a flag another
 * thread's wait or poll's stands behind, SANSWITCH_SPIN_US=0, or a doorbell owed that did not
 * land in time). Lock held.
 */
bool san_rxwatch_defer(struct san_sock *s);

/*
 * A nonblocking receive found the ring empty (EAGAIN): left quiet as san_rxwatch_defer leaves
 * it (true), if a wait through the preload watched its ring since its last epoll_ctl, so that
 * the application's next wait is likely ours again and its spin catches the next frame; the
 * peer then rings no doorbell for it. false: arm, as for a wait we cannot see. Lock held.
 */
bool san_rxwatch_defer_empty(struct san_sock *s);

/*
 * Armed if quiet, and off this process's count: before a fork copies or shares s
 * (san_sock_atfork_prepare: a connection the fork shares must not stay quiet, the other
 * process's waits and tick would never arm it, and the child's count starts at 0), and when
 * this process's close lets go of it (another process may go on with it; the count must not
 * keep the tick running for a connection no announce here will find). Lock held.
 */
void san_rxwatch_unquiet(struct san_sock *s);

/*
 * A successful epoll_ctl of fd (op). Sets that existed at a fork are the family's: a process's
 * copy of one (core/san_epshadow.h) does not see another's changes. The child does not use its
 * copies; the parent keeps its own (a forking server's, redis' BGSAVE), and only connections
 * the fork shared can be in both, so one changed (MOD, DEL) while shared is never watched
 * again: its readiness comes from the kernel. Any op ends an edge-triggered watch's hold on the
 * peer's doorbell per commit (the registration may not be the fd's only one any more).
 */
void san_rxwatch_epoll_ctl(int fd, int op);

/* A fork child: the tick is the parent's. */
void san_rxwatch_atfork_child(void);

/* The sock's quiet state ends (an arm, X rung). Lock held. */
void san_rxwatch_quiet_end(struct san_sock *s);

#endif
