/* core — SAN providers: what the engine asks of the transport under the session protocol. */
#ifndef SAN_PROV_H
#define SAN_PROV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct san_sock;

/*
 * One provider carries switched connections of one kind (docs/engine.md §1): shm between
 * processes of one host today; verbs (docs/verbs.md) to come. The engine above it -- fd table,
 * readiness, the receive and send paths over sealed frames in two rings, the session messages --
 * is the same for all; what differs is how the upgrade finds and proves the peer (the side
 * channel), how the peer learns that a frame or room is there, and how a transfer's bulk bytes
 * reach the receiver. Each connection holds the provider that carries it (s->prov), chosen by
 * A when it proposes and by B from the PROPOSE it accepts.
 */
struct san_prov_ops {
	const char *name; /* in logs and docs: "shm" */
	uint8_t wire;	  /* SAN_PROV_* in PROPOSE */

	/* ---- the side channel (upgrade) ---- */
	/* Serve proposals for a tracked TCP listener (B's side); 0 or -errno. */
	int (*listen)(int lfd);
	/* The TCP listener was closed: stop serving it (after a short linger). */
	void (*unlisten)(int lfd);
	/* fork() child: forget the parent's listeners (no engine runs them here). */
	void (*atfork_child)(void);
	/*
	 * A: propose the upgrade of s and run the handshake to commit, or fall back. Lock held.
	 * Returns SAN_PROV_NO_PEER, with s untouched, when nobody answers on this provider's side
	 * channel (the peer is not on this host for shm, has no RDMA listener for verbs): the
	 * next provider the policy allows may try. 0 otherwise (committed, or fallen back).
	 */
	int (*propose)(struct san_sock *s);

	/* ---- the data path, lock held ---- */
	/* A commit found the peer's consumer asleep: wake it (its X becomes readable). */
	void (*ring_peer)(struct san_sock *s);
	/* A release (or a direct read's report) found the peer's producer waiting for room. */
	void (*wake_producer)(struct san_sock *s);
	/*
	 * n bytes of the peer's bulk area from off (checked by the caller to lie inside it) into
	 * iov, starting at byte at of iov.
	 */
	void (*bulk_copy)(struct san_sock *s, uint64_t off, const struct iovec *iov, int iovcnt,
			  size_t at, size_t n);
	/*
	 * Optional. Bring in what the peer has already sent (verbs: completions not yet taken
	 * into the private inbound ring), before the anchor's EOF is believed. Lock held.
	 */
	void (*progress)(struct san_sock *s);
	/* Optional. The connection was closed or reset: the provider may finish (lock held). */
	void (*closed)(struct san_sock *s);
	/*
	 * Optional. A blocking receive spins on s (lock held): take in what has arrived, as
	 * cheaply as possible (verbs: poll the CQ; its events stay the engine thread's).
	 */
	void (*spin_poll)(struct san_sock *s);
};

#define SAN_PROV_NO_PEER 1

extern const struct san_prov_ops san_prov_shm;
extern const struct san_prov_ops san_prov_verbs;

/*
 * The providers A may propose under SANSWITCH_PROVIDER, in order: the one after @prev (NULL:
 * the first), or NULL when no (further) provider may carry it.
 */
const struct san_prov_ops *san_prov_for_a(const struct san_prov_ops *prev);
/* The provider a PROPOSE names, if this build has it and the policy allows it; else NULL. */
const struct san_prov_ops *san_prov_by_wire(uint8_t wire);
/* Does the policy allow any provider of this build? If not, every connection is plain TCP. */
bool san_prov_any(void);
/* A tracked listener: every provider the policy allows serves its side channel. */
void san_prov_listen(int lfd);
void san_prov_unlisten(int lfd);
void san_prov_atfork_child(void);
/*
 * A wait (poll, select, epoll, a blocking call) spins: providers whose arrivals need another
 * thread's work to show on X (verbs: the engine thread's CQ polling) do that work now, for
 * every connection whose lock is free. One load when no such connection exists.
 */
void san_prov_spin(void);

#endif /* SAN_PROV_H */
