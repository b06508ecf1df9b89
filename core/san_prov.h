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
	 * Optional. B, at the first data call or wait on a connection in a process that may not be
	 * the one its PROPOSE reaches (a worker that accepted on its parent's listener, a fork
	 * child serving what its parent accepted): make this process reachable for it (verbs: its
	 * own rdma_cm listener, named in the family's table, san_vredir.h). Lock held.
	 */
	void (*name_conn)(struct san_sock *s);
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
	 * n bytes of a transfer's rest from off of the area (checked by the caller to lie inside
	 * it; the rest ends at end) into iov, starting at byte at of iov. read: the transfer came
	 * by READ (SRC_AVAIL), else by GRANT (WRITE_DONE). peek: MSG_PEEK (the same bytes will be
	 * asked for again). 0, or -errno with the connection reset (nothing of iov may then be
	 * believed).
	 */
	int (*bulk_copy)(struct san_sock *s, bool read, bool peek, uint64_t off, uint64_t end,
			 const struct iovec *iov, int iovcnt, size_t at, size_t n);
	/*
	 * Optional. A grant transfer's bytes sit in our area at [off, off + len): put them where
	 * the peer's grant says, before its WRITE_DONE goes (verbs: RDMA WRITE; shm: the area is
	 * the peer's memory already). 0; -EAGAIN: not now (tx_wait_area, area_arm wakes);
	 * -ECONNRESET.
	 */
	int (*bulk_push)(struct san_sock *s, uint64_t off, uint64_t len);
	/*
	 * The sender's regions of the area are freed in order, each by a key the provider gives
	 * (shm: the ring position past its SRC_AVAIL or WRITE_DONE, freed as the peer's consumer
	 * passes it; verbs: the transfer's id, freed by the peer's READ_DONE):
	 * area_key: the key of the transfer being announced now.
	 * area_released: the key every region up to which is free; 0 or -errno (broken).
	 * area_arm: a send found the area full: 1 if the oldest region is free already, else 0
	 * with the sender's X to be unplugged when it is.
	 */
	uint64_t (*area_key)(struct san_sock *s);
	int (*area_released)(struct san_sock *s, uint64_t *key);
	int (*area_arm)(struct san_sock *s);
	/*
	 * The socket buffer sizes' bound (docs/protocol.md, "Socket buffer sizes"), for a
	 * provider that can see how far the peer's application has read (NULL: no bound):
	 * peer_read_to: the position of our outbound ring up to which the peer's application
	 * has read, in txr's units (shm: its consumer index; verbs: the pump's, less the frame
	 * bytes sent that the peer's RCV_WINDOW does not yet report read); 0, -EAGAIN while the
	 * peer's window is not known yet (verbs: before its first RCV_WINDOW), or -errno.
	 * peer_read_arm: a send found the window full (or not known yet): 1 if the peer has
	 * read up to pos already, else 0 with the sender's X to be unplugged when it has.
	 * rcv_window_set: optional; our application's receive window (in rxr's header,
	 * san_shm_ring_cons_window) changed: tell the peer (verbs: RCV_WINDOW).
	 */
	int (*peer_read_to)(struct san_sock *s, uint64_t *pos);
	int (*peer_read_arm)(struct san_sock *s, uint64_t pos);
	void (*rcv_window_set)(struct san_sock *s);
	/* Optional. The receiver has delivered transfer id's every byte (verbs: READ_DONE). */
	void (*xfer_done)(struct san_sock *s, uint32_t id);
	/*
	 * The peer's standing WRITE_GRANT names its area by address and key (verbs), not by
	 * the shared mapping (shm: both 0).
	 */
	bool grant_keys;
	/*
	 * The peer's consumer index of our outbound ring is its application's own progress (shm:
	 * the rings are shared memory), so once the peer's process is gone we can tell whether it
	 * left bytes of ours unread, as the kernel tells FIN from RST at its close (verbs: the
	 * index is our provider's, which sends frames; the peer's reads are not seen).
	 */
	bool peer_reads_seen;
	/*
	 * A switched connection may be held by several processes after a fork() (shm: the rings,
	 * the notification sockets and the anchor are shared memory and inherited fds, and the
	 * sock's state sits in a shared slot). Without it the child's copy is an orphan (verbs: a
	 * QP belongs to the process that made it). docs/engine.md §7.1.
	 */
	bool shared_by_fork;
	/*
	 * Optional. True when this provider can carry nothing on this host (verbs: no rdma_cm
	 * device, found at the first listen or connect); no PROPOSE of its kind can come then.
	 */
	bool (*absent)(void);
	/*
	 * Optional. Bring in what the peer has already sent (verbs: completions not yet taken
	 * into the private inbound ring), before the anchor's EOF is believed. Lock held.
	 */
	void (*progress)(struct san_sock *s);
	/*
	 * Optional, where the peer's reads are not seen. True once the peer's DISCONNECT or
	 * ABORT has come, in the inbound ring or still held by the provider (verbs: a full ring
	 * leaves it in its receive slot): the stream ends in the peer's own words, and the
	 * anchor's end after it says nothing more (its RST may only mean that the peer's process
	 * left our MARK unread). Lock held.
	 */
	bool (*peer_said_end)(struct san_sock *s);
	/*
	 * Optional. Our MARK is due (san_sock_mark_flush: our first stream bytes or our end are
	 * in the outbound ring) but the ring is not the peer's memory: the provider writes the
	 * MARK itself once what the ring holds up to here has reached the peer (verbs: their
	 * SENDs' completions), so that a reader woken by the MARK finds them. Lock held.
	 */
	void (*mark_after)(struct san_sock *s);
	/*
	 * Optional. The peer's MARK was read: bring in the frames it went after (mark_after), so
	 * that the receive that follows finds them (verbs: from the CQ, here, rather than when the
	 * engine thread comes to it). Lock held.
	 */
	void (*mark_read)(struct san_sock *s);
	/*
	 * Optional. We reset the connection and posted its ABORT: true if the provider takes
	 * on the anchor's reset, to do it (san_sock_reset_anchor on its own dup of the TCP
	 * socket) once the frames before the ABORT and the ABORT itself have reached the peer,
	 * within a bound (verbs: they wait in this process, sent by the engine thread, and an RST
	 * that overtook them would make the peer drop what TCP delivers before its reset);
	 * false: the anchor is reset at once (shm: the ring is the peer's memory already, and
	 * the peer hears of the reset at once, even while its application only polls). Lock held.
	 */
	bool (*hold_reset)(struct san_sock *s);
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
/*
 * May a PROPOSE come from another host (a provider other than shm allowed and present)? B's
 * receives may go to the kernel unwatched only when not (core/san_sock.c, sock_direct).
 */
bool san_prov_remote(void);
/* A tracked listener: every provider the policy allows serves its side channel. */
void san_prov_listen(int lfd);
void san_prov_unlisten(int lfd);
void san_prov_atfork_child(void);
/* B's first touch of s in this process: every allowed provider's name_conn. Lock held. */
void san_prov_name_conn(struct san_sock *s);
/*
 * A wait (poll, select, epoll, a blocking call) spins: providers whose arrivals need another
 * thread's work to show on X (verbs: the engine thread's CQ polling) do that work now, for
 * every connection whose lock is free. One load when no such connection exists.
 */
void san_prov_spin(void);
/*
 * A wait is about to sleep in the kernel (begin: true if counted, to pass to end) and is back.
 * Providers whose completions another thread's spin may be taking without notice arrange that
 * they wake someone while it sleeps (verbs: the CQs left unarmed are armed, docs/verbs.md §3,
 * "Who polls"). Two atomic operations on a counter of the process's sleepers; not the
 * engine thread's waits.
 */
bool san_prov_sleep_begin(void);
void san_prov_sleep_end(bool counted);
/*
 * san_prov_sleep_end(*(bool *)counted), as a pthread_cleanup_push handler: the real poll,
 * select and epoll_wait are cancellation points, and a thread cancelled asleep in one must be
 * counted off too (SAN_SLEEPING in preload/san_wait.c).
 */
void san_prov_sleep_done(void *counted);
/*
 * _exit(): what exit() does for queued frames in an atexit handler (verbs: they live in this
 * process, unlike TCP's socket buffers), done here too, without stdio. Bounded; no lock taken
 * that could be the interrupted thread's (it may run in a signal handler).
 */
void san_prov_exit(void);
/*
 * exec(): the process image, and with it verbs' queued frames and QPs, is replaced: the
 * provider ends its connections (DISCONNECT after their data, as a write shutdown) and waits
 * for the frames, as at exit. An exec that fails after it leaves them shut for writing, so it
 * is asked only when the exec will find its program (san_core_before_exec), and only when
 * san_prov_exec_wanted says this process has such connections (that check is cheaper).
 */
bool san_prov_exec_wanted(void);
void san_prov_exec(void);

#endif /* SAN_PROV_H */
