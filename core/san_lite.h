/* core — lite candidates: an accepted connection that has no sock until something needs one. */
#ifndef SAN_LITE_H
#define SAN_LITE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "core/san_owner.h"

struct san_stats_conn;

/* Registrations a lite candidate keeps itself (an event loop's one set); one more makes the sock. */
#define SAN_LITE_EPOLL_MAX 2

/*
 * A server's candidate (B) costs a sock from accept() to close(): a slot, its process-shared
 * robust lock taken twice per data call, the registry's lock in every lookup, about 4,600
 * instructions over a short connection's life where the pass-through path costs none
 * (docs/performance.md, "Short connections"). Yet most such connections end before the
 * client proposes anything (protocol.md §9.7: A proposes at its 17th exchange), and B's
 * calls need only two things of the candidate meanwhile: their counts (B's offsets, and the
 * check that nobody moved bytes behind our wrappers), and that the engine can stop them at a
 * moment when none is in the kernel, to pause its reader.
 *
 * So a lite candidate is a gate per fd number: a data call enters it (one compare-and-swap),
 * goes to the kernel as the application made it, adds its bytes to the record's counts (an
 * atomic add) and leaves (another compare-and-swap); whoever needs the sock
 * (a PROPOSE, an epoll_ctl, a dup, a fork) closes the gate, which succeeds only while no call
 * is inside, and makes the sock then (san_sock.c, lite_promote). Calls that find the gate closed
 * take the sock's path. The gate word carries the connection's generation, so a call that
 * began on an earlier connection under the same number never counts in a later one's gate.
 *
 * A client's candidate (A) is lite too, until its calls could be due (protocol.md §9.7): A
 * proposes itself, in the send that begins its exchange SANSWITCH_SWITCH_AFTER + 1, or once its
 * calls moved SAN_SWITCH_BYTES. So its sock is made by the call that could be due: that send
 * (the lite counts the exchanges as a sock would), or any call once a quarter of those bytes
 * moved (san_sock.c, lite_a_due).
 * Nothing outside the process needs its gate closed (no PROPOSE comes to a client), so its
 * blocking calls sleep in the kernel inside the gate; a due call that finds another thread's
 * call inside leaves a_want, and the first call that finds the gate free makes the sock.
 *
 * One record per fd number, in a private mapping like the registry's; written by the calls of
 * the number's connection and by whoever closes its gate. The engine reads the tuple fields.
 */
struct san_lite {
	uint64_t gate;		    /* generation << 32 | SAN_LITE_* | calls inside */
	uint64_t tx, rx;	    /* bytes its calls moved over TCP: the sock's counts, the stats */
	uint64_t a_end_ns;	    /* A: its window's end (connect + SAN_A_WINDOW_MS); 0: B's */
	uint64_t a_ex_rx0;	    /* A: rx as its current exchange's first send began (a_sent) */
	uint32_t a_ex_done;	    /* A: exchanges it completed (a_due) */
	uint32_t a_want;	    /* A: its sock is due, and a call inside kept the gate open */
	uint32_t a_peer_known;	    /* A: a_peer is the address connect() was given */
	struct san_addr a_peer;
	struct san_stats_conn *stc; /* its sanstat slot, or NULL */
	uint32_t sent;		    /* a send has gone */
	uint32_t b_ex;		    /* B: its sends that moved bytes (lite_b_may_be_due) */
	uint32_t b_outside;	    /* B: the generation refused BUSY: its receives wait outside */
	uint32_t last_tx;	    /* the last call that moved bytes sent them (a hint, racy) */
	uint32_t touched;	    /* a data call was made (san_up.c: not waiting for a fork child) */
	uint32_t sleepers;	    /* blocking receives in the kernel (they may wait for the client) */
	uint32_t ep_lock;	    /* held while nep/ep change (epoll_ctl calls, inside the gate) */
	uint32_t nep;		    /* its registrations in epoll sets, for the sock's swap */
	struct {
		int epfd;
		struct epoll_event ev;
	} ep[SAN_LITE_EPOLL_MAX];
	uint32_t tuple_gen;	    /* the generation the tuple was asked for (engine only) */
	uint32_t tuple_state;	    /* 0 unknown, 1 known, 2 cannot be asked (engine only) */
	struct san_tuple tuple;	    /* (engine only) */
};

#define SAN_LITE_LIVE 0x80000000u   /* a lite candidate's gate */
#define SAN_LITE_CLOSED 0x40000000u /* no call may enter: being made a sock, or gone */
#define SAN_LITE_DRAIN 0x20000000u  /* the engine waits for the calls inside; none may enter */
#define SAN_LITE_CALLS 0x1fffffffu

/* The table, made with the registry's size (san_fdt.size); 0 or -ENOMEM. */
int san_lite_init(unsigned int size);

/* fd's record if fd names a live lite candidate (gate open or closing), else NULL. */
struct san_lite *san_lite_of(int fd);

/* accept(): fd is a lite candidate now. False: no table, or calls of the number's last
 * connection still inside its gate (closed under them): make a sock. */
bool san_lite_open(int fd, struct san_stats_conn *stc);

/* connect(): the same for a client's candidate (A): its record's A fields, set before its
 * gate opens (another thread's epoll_ctl may come at once). */
struct san_lite_a {
	uint64_t end_ns;	    /* when its window to propose ends (not 0) */
	const struct san_addr *peer; /* the address connect() was given, or NULL */
	uint32_t nep;		    /* registrations made before the connect (at most the max) */
	struct {
		int epfd;
		struct epoll_event ev;
	} ep[SAN_LITE_EPOLL_MAX];
};
bool san_lite_open_a(int fd, struct san_stats_conn *stc, const struct san_lite_a *a);

/* Is fd's record a client's (A)? (Read without the gate: for a live lite candidate.) */
bool san_lite_is_a(int fd);

/*
 * A data call on fd enters its gate: the record, and *gen for san_lite_leave, or NULL (not a
 * lite candidate, or its gate closed: take the sock's path).
 */
struct san_lite *san_lite_enter(int fd, uint32_t *gen);
void san_lite_leave(struct san_lite *l, uint32_t gen);

/*
 * Close fd's gate while no call is inside: true and *gen set if this caller closed it (it must
 * then end it, san_lite_end); false if calls are inside, or it is not an open lite candidate.
 */
bool san_lite_close_gate(int fd, uint32_t *gen);

/*
 * The engine, for a PROPOSE: close fd's gate once the calls inside have left; meanwhile none
 * may enter. 1: closed by us (*gen set; san_lite_end follows); 0: calls still inside, draining
 * (ask again, or san_lite_undrain); -1: not an open lite candidate, or another closes it.
 */
int san_lite_drain(int fd, uint32_t *gen);
void san_lite_undrain(int fd);

/*
 * The engine, before it undrains a gate it refused BUSY (a blocking receive asleep inside with
 * nothing to return): from now on the candidate's blocking receives wait outside the gate, so
 * that the peer's next try finds it free (san_sock.c, lite_b_may_be_due).
 */
void san_lite_refused_busy(int fd);

/* The gate closed by us: the number is no lite candidate any more (a sock, or plain TCP). */
void san_lite_end(struct san_lite *l, uint32_t gen);

/*
 * close(): the gate closes whatever calls are inside (they leave by themselves), and over a
 * drain of the engine's (which then finds no lite); it waits only for a closer making a sock.
 * The record, or NULL if fd was no lite candidate; *gen its generation.
 */
struct san_lite *san_lite_shut(int fd, uint32_t *gen);

/*
 * A fork child: fd is no lite candidate any more, at once, whatever state the parent's threads
 * left its gate in (a closer, a drain of the engine's: none of them exists here, and waiting
 * for them would wait for ever). True if it was one.
 */
bool san_lite_forget(int fd);

/*
 * A close the wrappers never saw (san_track.c, a stale slot): fd is no lite candidate any more,
 * at once, but the calls of this process's threads still inside stay counted (san_lite_open
 * refuses the number until they have left). True if it was one.
 */
bool san_lite_forget_stale(int fd);

/* Another thread is closing (or the engine draining) fd's gate: wait until it has decided. */
void san_lite_wait_closing(int fd);

/* Highest number + 1 that may name a lite candidate (for the scans of fork and sandbox). */
unsigned int san_lite_end_of_numbers(void);

#endif /* SAN_LITE_H */
