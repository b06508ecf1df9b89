/* core — verbs transport: rdma_cm connection set-up and credit-controlled RC SEND messaging. */
#ifndef SAN_VERBS_H
#define SAN_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The first layer of the verbs provider (docs/verbs.md): one RC QP per connection, set up with
 * librdmacm in the RDMA_PS_TCP port space, moving opaque messages of at most max_msg bytes with
 * SENDs into pre-posted receive slots (core/san_vpool.c books the slots of one registered area).
 *
 * Flow control is proto/san_credit.c, i.e. docs/protocol.md §11 verbatim: every message starts
 * with a 4-byte transport header {type, 0, credits (16 bits, little endian)} where type is a
 * session type (HELLO, DATA, CREDIT_UPDATE); each side's first message is a transport HELLO
 * announcing its pool (N receive slots, return threshold T, max_msg); a message spends one credit,
 * a delivered message's slot is re-posted when the receiver is done with it (at once, or when the
 * application releases a slot it held: san_verbs_hold/san_verbs_release, §11.1 "Freeing") and
 * returned in the credits field of the next message, or in a CREDIT_UPDATE once T are pending.
 * User messages are DATA class, so they never take the last T_peer + 1 credits and the updates
 * always get through. While the receiver holds slots its peer has fewer credits; holding more than
 * N - T - 2 stops the peer's DATA until some are released (the receiver's own choice).
 *
 * Several connections per listener: san_verbs_accept_next may be called again and again; each
 * connection has its own CM channel, PD, CQ, QP and registered area, so connections are
 * independent and may be driven by different threads, one thread per connection at a time.
 *
 * Memory: each connection registers (pins) (N + S) slots of max_msg + 4 bytes rounded up to 64
 * (about 520 KiB with the defaults), counted against RLIMIT_MEMLOCK unless the process has
 * CAP_IPC_LOCK (root usually has: then no limit applies, on rxe as on hardware). Too low a limit
 * makes set-up fail with the errno of ibv_reg_mr (-ENOMEM, or -EPERM), a warning naming the limit,
 * and everything set up so far undone; the listener is unaffected.
 *
 * Threading: none inside. A connection is used by one thread at a time (the caller's lock).
 * Every function returns 0 or a count, or a negative errno; nothing aborts or prints except
 * through core/san_log.h.
 *
 * Waiting: san_verbs_fd() is the completion channel's fd (O_NONBLOCK), for poll()/libev:
 *
 *     for (;;) {
 *             san_verbs_poll(c, cb, arg);            // deliver, free slots, return credits
 *             ...san_verbs_send() until -EAGAIN...
 *             if (san_verbs_arm(c) > 0) continue;    // completions slipped in: no sleep
 *             poll(fd readable); san_verbs_ack(c);
 *     }
 */

struct san_verbs_listener;
struct san_verbs_conn;

/* Per-connection geometry; zeros take the defaults. */
struct san_verbs_params {
	uint32_t nrecv;	    /* N: receive slots posted for the peer (default 64) */
	uint32_t threshold; /* T: credit-return threshold (default 16); 2 <= T, 2T + 1 <= N */
	uint32_t nsend;	    /* S: send slots (default 64) */
	uint32_t max_msg;   /* largest user message, bytes (default 4096 + 16) */
	uint32_t nrdma;	    /* RDMA READ/WRITE work requests outstanding at most (default 16) */
};

#define SAN_VERBS_HDR 4		   /* transport header prepended to every message */
#define SAN_VERBS_PDATA_CONNECT 56 /* private data the CM carries in a connect (RoCE/IB) */
#define SAN_VERBS_PDATA_ACCEPT 196 /* ... and in an accept */
#define SAN_VERBS_TIMEOUT_MS 500   /* default for address and route resolution */

/*
 * Passive side: bind @addr (numeric or name; NULL or "" = any) and @port, rdma_listen in
 * RDMA_PS_TCP. 0 and *out, or -errno (-ENODEV: no RDMA device serves the address;
 * -EADDRINUSE; -ENOSYS/-ENOENT when the host has no rdma_cm at all).
 */
int san_verbs_listen(const char *addr, uint16_t port, const struct san_verbs_params *params,
		     struct san_verbs_listener **out);

/* The listener's event-channel fd (O_NONBLOCK): readable when a connect request may wait. */
int san_verbs_listener_fd(const struct san_verbs_listener *l);
/* The port it is bound to (one asked for as 0 gets a free one), host order; 0 if unknown. */
uint16_t san_verbs_listener_port(const struct san_verbs_listener *l);

/*
 * Take the next connect request within @timeout_ms (< 0: no limit; 0: only one already waiting):
 * copy the initiator's private data into @pdata_in (capacity *pdata_in_len, at least
 * SAN_VERBS_PDATA_CONNECT is advisable; on return *pdata_in_len = bytes the CM delivered: the CM
 * pads to its fixed size, so the caller's format must carry its own length), set up the
 * connection's resources, accept with @pdata_out (at most SAN_VERBS_PDATA_ACCEPT bytes) and wait
 * for ESTABLISHED. 0 and *out; -ETIMEDOUT; -errno (the request is rejected or the half-made
 * connection closed; the listener stays usable).
 */
int san_verbs_accept_next(struct san_verbs_listener *l, int timeout_ms, struct san_verbs_conn **out,
			  void *pdata_in, size_t *pdata_in_len, const void *pdata_out,
			  size_t pdata_out_len);

/*
 * The same in two steps, for a listener that must look at the proposal before it answers (and
 * may take its time: the initiator waits up to its timeout). san_verbs_request_next takes the
 * next connect request (as above) and returns it undecided; san_verbs_request_accept accepts it
 * (set-up, accept with @pdata_out, ESTABLISHED within @timeout_ms) and san_verbs_request_reject
 * refuses it with @pdata (the initiator's connect fails with -ECONNREFUSED). Either consumes the
 * request. Results as san_verbs_accept_next. With @timeout_ms 0 the accept does not wait: the
 * connection is returned at once, its CM fd reports ESTABLISHED (or a failure) and
 * san_verbs_poll takes it (then sends the HELLO: no credit before that; a failed accept reads as
 * -ECONNRESET from san_verbs_poll).
 */
struct san_verbs_request;
int san_verbs_request_next(struct san_verbs_listener *l, int timeout_ms,
			   struct san_verbs_request **out, void *pdata_in, size_t *pdata_in_len);
int san_verbs_request_accept(struct san_verbs_listener *l, struct san_verbs_request *rq,
			     int timeout_ms, struct san_verbs_conn **out, const void *pdata_out,
			     size_t pdata_out_len);
void san_verbs_request_reject(struct san_verbs_request *rq, const void *pdata, size_t len);
/* Where a request came from and to (IP addresses as the CM saw them; ports are the CM's own). */
struct sockaddr_storage;
void san_verbs_request_addrs(const struct san_verbs_request *rq, struct sockaddr_storage *peer,
			     struct sockaddr_storage *local);

void san_verbs_listener_close(struct san_verbs_listener *l);

/*
 * Active side: resolve @addr:@port (address and route, each within min(timeout_ms, remaining)),
 * set up, connect with @pdata (at most SAN_VERBS_PDATA_CONNECT bytes), wait for ESTABLISHED
 * within @timeout_ms overall, not counting the local set-up (the event channel, opening the
 * devices, the QP, the slots' registration) (< 0: SAN_VERBS_TIMEOUT_MS for resolution, no limit
 * after). The
 * acceptor's private data lands in @reply (capacity *reply_len; padded by the CM as above), and
 * so does a rejecting listener's (with -ECONNREFUSED; *reply_len 0 when there was none).
 * 0 and *out, or -ECONNREFUSED (rejected: nobody listens there, or the peer refused),
 * -EHOSTUNREACH / -ENETUNREACH (address, route or peer unreachable), -ETIMEDOUT, -errno.
 */
int san_verbs_connect(const char *addr, uint16_t port, const struct san_verbs_params *params,
		      const void *pdata, size_t pdata_len, int timeout_ms,
		      struct san_verbs_conn **out, void *reply, size_t *reply_len);

/* The completion channel's fd (O_NONBLOCK), to be watched for readability. */
int san_verbs_fd(const struct san_verbs_conn *c);

/* The CM event channel's fd of this connection (O_NONBLOCK): readable on DISCONNECTED etc. */
int san_verbs_cm_fd(const struct san_verbs_conn *c);

/*
 * Send one message of @len (1 .. peer's max_msg) bytes: copied into a send slot, so @msg may
 * be reused at once; IBV_SEND_INLINE when it fits the QP's max_inline_data. 0, -EAGAIN (no
 * credit — the peer's HELLO has not come yet, or its slots are full — or no free send slot),
 * -EMSGSIZE, -ECONNRESET (the connection broke), -EPIPE (after san_verbs_close started).
 */
int san_verbs_send(struct san_verbs_conn *c, const void *msg, size_t len);

/*
 * The same for a message the peer's side takes off at once, never keeping its slot (a
 * provider's READ_DONE): it travels as CTRL class (docs/protocol.md §11), which may spend
 * the last credits but one that DATA leaves unspent, so it gets through whatever the peer's
 * application does. The receiving callback must not san_verbs_hold() it (-EPROTO).
 */
int san_verbs_send_ctrl(struct san_verbs_conn *c, const void *msg, size_t len);

/* Would san_verbs_send() of one message be accepted now (credit and send slot)? */
int san_verbs_can_send(const struct san_verbs_conn *c);

/*
 * Delivered messages: @msg points into the receive slot, valid only during the call (the slot is
 * re-posted when the callback returns) unless the callback calls san_verbs_hold(). A non-zero
 * return stops san_verbs_poll, which returns it (a held slot stays held).
 */
typedef int (*san_verbs_msg_cb)(void *arg, const void *msg, size_t len);

/*
 * From inside the message callback only: keep the slot of the message being delivered. @msg then
 * stays valid (the peer cannot overwrite it) until san_verbs_release(c, handle) or
 * san_verbs_close; its credit goes back to the peer only on release. Returns the slot's handle
 * (>= 0; calling it twice returns the same), or -EINVAL outside a callback of @c.
 */
int san_verbs_hold(struct san_verbs_conn *c);

/*
 * Give back a held slot: it is re-posted at once and counted as freed, so its credit returns in
 * the next message or, once T are pending, in a CREDIT_UPDATE sent from here (or from the next
 * san_verbs_poll when no send slot is free). Any order, any time, also from inside a callback.
 * 0; -EINVAL (not a receive slot's handle); -EALREADY (the slot is not held: released twice, or
 * never kept); -ECONNRESET when re-posting failed. On a broken connection it only does the books
 * (0).
 */
int san_verbs_release(struct san_verbs_conn *c, int64_t slot);

/*
 * Drain the CQ (and the connection's CM events): receive completions deliver then re-post,
 * send completions free their slots, pending credits go back in a CREDIT_UPDATE when due.
 * Returns the number of completions handled (> 0: something changed — a message, credits, a free
 * send slot, an RDMA completion — so retry what waited), the callback's non-zero return, or
 * -ECONNRESET once a completion failed or the peer disconnected (every later call too: messages
 * that arrived before the disconnect are delivered first, by the same call), -EPROTO
 * when the peer broke the credit rules or sent a malformed message.
 */
int san_verbs_poll(struct san_verbs_conn *c, san_verbs_msg_cb cb, void *arg);

/*
 * Ask for the next completion event, then look at the CQ once more (the race between the last
 * poll and the request). 1: completions are waiting (call san_verbs_poll, do not sleep); 0: armed,
 * safe to sleep on san_verbs_fd(); -errno.
 */
int san_verbs_arm(struct san_verbs_conn *c);

/* The fd was readable: take and acknowledge the channel's events. Their count, or -errno. */
int san_verbs_ack(struct san_verbs_conn *c);

/*
 * Bulk: RDMA READ and WRITE between registered regions (docs/verbs.md §4). A region belongs to
 * the connection's protection domain; its address and rkey travel in the caller's messages.
 */
enum {
	SAN_VERBS_REMOTE_READ = 1,  /* the peer may RDMA READ the region */
	SAN_VERBS_REMOTE_WRITE = 2, /* the peer may RDMA WRITE into it */
};

struct san_verbs_region {
	void *addr;
	size_t len;
	uint32_t lkey, rkey;
	void *mr; /* the struct ibv_mr */
};

/* Register [addr, addr + len) for local writes and @access (SAN_VERBS_REMOTE_*). 0 or -errno
 * (-ENOMEM/-EPERM: RLIMIT_MEMLOCK, -EFAULT: not mapped). */
int san_verbs_reg(struct san_verbs_conn *c, void *addr, size_t len, unsigned int access,
		  struct san_verbs_region *r);
/* Deregister (r->mr NULL: nothing). No READ/WRITE using it may be outstanding. */
void san_verbs_dereg(struct san_verbs_region *r);
/* The length a registration (san_verbs_region.mr) covers; 0 for NULL. */
size_t san_verbs_mr_len(const void *mr);
/*
 * rdma-core needs no fork support here (the kernel copies pinned pages for a fork child, and
 * nobody called ibv_fork_init): registering memory the application may free is safe from
 * rdma-core's side (no MADV_DONTFORK, no lock of its own around deregistration).
 */
bool san_verbs_fork_unneeded(void);

/*
 * The fastest active port of this host's RDMA devices, in bits per second (lanes x lane speed,
 * as ibv_query_port reports them); 0 when there is none or it cannot be told. Opens the devices
 * the first time (they stay open, as for san_verbs_connect).
 */
uint64_t san_verbs_port_rate(void);

/* A READ or WRITE completed: status 0, or -ECONNRESET when it failed (the connection is broken
 * then: every other outstanding one reports the same). Called from san_verbs_poll. */
typedef void (*san_verbs_rdma_cb)(void *arg, uint64_t cookie, int status);
void san_verbs_set_rdma_cb(struct san_verbs_conn *c, san_verbs_rdma_cb cb, void *arg);

/*
 * Post an RDMA READ of @len bytes from the peer's (@raddr, @rkey) into @local at @off, or an
 * RDMA WRITE of @local's [@off, @off + @len) there. Completion through san_verbs_poll's rdma
 * callback with @cookie. 0, -EAGAIN (nrdma outstanding), -EINVAL (outside @local), -ECONNRESET.
 * A SEND posted after a WRITE reaches the peer after the written bytes (RC ordering).
 */
int san_verbs_read(struct san_verbs_conn *c, const struct san_verbs_region *local, size_t off,
		   uint64_t raddr, uint32_t rkey, size_t len, uint64_t cookie);
int san_verbs_write(struct san_verbs_conn *c, const struct san_verbs_region *local, size_t off,
		    uint64_t raddr, uint32_t rkey, size_t len, uint64_t cookie);

/*
 * Break the connection now: the QP goes to the error state, so nothing more is placed in
 * local memory by a READ in flight; its completion (flushed) comes through san_verbs_poll,
 * which returns -ECONNRESET from then on.
 */
void san_verbs_kill(struct san_verbs_conn *c);

/*
 * SENDs posted so far and SENDs completed with success. A send queue completes in order, so
 * the message posted as the k-th is acknowledged by the peer's HCA (on RC: received, in its
 * receive slot) once done >= k: what a provider waits for before it says "delivered".
 */
void san_verbs_send_counts(const struct san_verbs_conn *c, uint64_t *posted, uint64_t *done);

/* Counters and parameters, for tools and tests. */
struct san_verbs_info {
	uint32_t max_inline;   /* the QP's max_inline_data */
	uint32_t peer_max_msg; /* from the peer's HELLO; 0 before */
	uint32_t tx_credits;   /* credits now */
	uint32_t sends_busy;   /* send slots in flight */
	uint64_t msgs_tx, msgs_rx, updates_tx, updates_rx, inline_tx;
	uint64_t credit_waits; /* san_verbs_send calls refused for lack of credit */
	uint32_t rx_held;      /* receive slots the application holds now */
	uint64_t holds;	       /* slots kept by san_verbs_hold, so far */
	uint64_t releases;     /* ... and given back by san_verbs_release */
	uint32_t rdma_busy;    /* READs/WRITEs outstanding */
	uint32_t rd_atom;      /* RDMA READs the QP may have in flight (initiator depth) */
	char dev[64];	       /* the device's name */
};
void san_verbs_get_info(const struct san_verbs_conn *c, struct san_verbs_info *info);

/* Disconnect, drain, destroy everything; NULL and half-set-up connections are fine. Held slots
 * go with it: their message pointers are invalid afterwards. */
void san_verbs_close(struct san_verbs_conn *c);

#endif /* SAN_VERBS_H */
