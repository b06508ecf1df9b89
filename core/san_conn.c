/* core — the switched data path over the shm rings: DATA in, DATA out, READ, doorbells, close. */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/san_config.h"
#include "core/san_cork.h"
#include "core/san_log.h"
#include "core/san_owner.h"
#include "core/san_rxwatch.h"
#include "core/san_shm_cma.h"
#include "core/san_sock.h"
#include "core/san_stats.h"
#include "core/san_stats_conn.h"
#include "core/san_sys.h"
#include "proto/san_bulk.h"
#include "proto/san_frame.h"
#include "proto/san_msg.h"
#include "proto/san_upgrade.h"
#include "proto/san_wire.h"

/*
 * Largest DATA payload per frame. Bigger frames mean fewer seals per byte; the ring must hold
 * at least two of them (a frame may be at most half the data area).
 */
#define SAN_CONN_CHUNK (64u * 1024u)

/*
 * How many waits of at most 1 ms an arm (or san_conn_rx_unarm) gives an owed doorbell before
 * taking it as lost: a peer descheduled between taking our flag and ringing (on a loaded
 * machine, several milliseconds; 2 ms was not enough there), stopped, or gone. Each wait ends
 * as the doorbell lands.
 */
#define SAN_CONN_BELL_WAITS 20
#define SAN_CONN_BELL_GIVEUPS 3

/*
 * A look at the ring that returns data (a receive, FIONREAD) takes the doorbells off X once
 * the peer has rung this many since the last drain. X's queue holds only a few hundred
 * zero-length messages (each is charged about 768 bytes against Y's send buffer: 278 with
 * the default 208 KiB); a reader that never meets an empty ring (it reads exactly what
 * FIONREAD said, as nginx does) would otherwise let it fill, and the doorbells after that
 * fail: an edge-triggered reader that waits for them never wakes. 32 bounds the queue far
 * below that, and costs one receive per doorbell plus two calls per 32 doorbells.
 */
#define SAN_CONN_BELLS_TRIM 32
static void rx_trim_bells(struct san_sock *s);

/* Ring our own X (the ring holds something): one more doorbell to take off, and to count. */
static void ring_self(struct san_sock *s)
{
	if (s->ylocal < 0)
		return;
	san_sock_ring_self(s);
	san_rxwatch_quiet_end(s);
	s->rxr.bells_due++;
	s->rxr.bells_self++;
}

/* Bytes sent over the SAN (stats on): the process's count and the connection's sanstat slot. */
static void count_san_tx(struct san_sock *s, uint64_t n)
{
	san_stats_add(SAN_STAT_SAN_TX_BYTES, n);
	if (s->proc->stc)
		san_stats_conn_add(&s->proc->stc->san_tx, n);
}

/*
 * The largest DATA payload this connection's frames carry: SAN_CONN_CHUNK, or less when the
 * provider's messages are smaller (verbs: a receive slot holds one message).
 */
static size_t chunk_max(const struct san_sock *s)
{
	size_t room = s->txr.max_msg - SAN_HDR_LEN;

	return room < SAN_CONN_CHUNK ? room : SAN_CONN_CHUNK;
}

/*
 * READ on shm (docs/protocol.md, "READ on shm"): sends of at least SAN_CONN_READ_MIN bytes go
 * by READ under SANSWITCH_BULK=auto (below it one hashed copy through the ring costs less than
 * the two extra frames); under =read every send above the inline threshold does. A region is
 * at most a quarter of the area, so the peer reads one while we fill the next, and at least
 * SAN_CONN_REGION_MIN unless the send is smaller: a nearly full area means wait, not crumbs.
 */
#define SAN_CONN_READ_MIN (16u * 1024u)
#define SAN_CONN_REGION_MIN (16u * 1024u)

/*
 * Direct grant (docs/protocol.md "Direct grant on shm"): a blocking receive about to sleep with
 * a buffer of at least SAN_CONN_DIRECT_MIN bytes offers it; a send of at least that much (under
 * SANSWITCH_BULK=grant: above the inline threshold) writes straight into it. Below it the
 * system call (about 2.4 us) costs more than the two copies it saves.
 */
#define SAN_CONN_DIRECT_MIN (32u * 1024u)

/*
 * Direct read (docs/protocol.md "Direct read on shm"): a blocking send of at least
 * SAN_CONN_SRC_MIN bytes in its first buffer, to a peer whose application waits for data,
 * offers that buffer and waits a moment for the peer to take it (san_sock.c, src_wait); then
 * the bytes go through the area instead.
 */
#define SAN_CONN_SRC_MIN (64u * 1024u)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Copy n bytes between buf and the iovec array from its byte off: into iov if to_iov. */
void san_conn_iov_copy(const struct iovec *iov, int cnt, size_t off, void *buf, size_t n,
		       bool to_iov)
{
	char *p = buf;

	for (int i = 0; i < cnt && n; i++) {
		size_t l = iov[i].iov_len, k;
		char *v;

		if (off >= l) {
			off -= l;
			continue;
		}
		k = l - off < n ? l - off : n;
		v = (char *)iov[i].iov_base + off;
		memcpy(to_iov ? v : p, to_iov ? p : v, k);
		p += k;
		n -= k;
		off = 0;
	}
}

/* Make our X unwritable until the peer drains its Y (docs/engine.md §5): a few 2 KiB plugs. */
static void plug(struct san_sock *s)
{
	static const char plugs[2048];

	for (int i = 0; i < 4; i++)
		if (san_sys_send(s->xfd, plugs, sizeof(plugs), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			break;
}


static void ring_broken(struct san_sock *s, const char *what, int r)
{
	san_warn("fd %d: %s: %s%s%s", s->fd, what, r == -EPROTO ? "broken ring" : san_proto_strerror(r),
		 s->rxr.why ? ": " : "", s->rxr.why ? s->rxr.why : "");
	san_sock_reset_locked(s, -ECONNRESET, r == -EPROTO ? SAN_R_PROTOCOL : SAN_R_PROTOCOL);
}

/*
 * SANSWITCH_FAULT=ring_garbage: what a hostile peer can do to the memory it shares with us,
 * done to our peer in place of a data commit (the frame reserved is never published): random
 * bytes over our bulk area and the ring's data area, and a producer index that claims more
 * than the ring holds, then the doorbell. The peer must reset this connection, and nothing
 * else (t_shape_users).
 */
static void ring_garbage(struct san_sock *s)
{
	uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ s->txr.prod;

	for (uint64_t i = 0; i < s->txr.size; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(s->txr.data + i, &x, 8);
	}
	if (s->bulk_tx)
		memset(s->bulk_tx, 0xa5, s->bulk_size);
	atomic_store_explicit(&s->txr.sh->prod, s->txr.prod + s->txr.size + 8, memory_order_seq_cst);
	s->prov->ring_peer(s);
}

/* A corked send's hold (san_cork.h) ends: whether there was one. Lock held. */
static bool cork_hold_end(struct san_sock *s)
{
	if (!s->bell_held)
		return false;
	s->bell_held = false;
	san_cork_end();
	return true;
}

/*
 * Publish the reserved frame and ring the peer if it sleeps. data: the frame carries stream
 * bytes (DATA, a transfer's rest, a direct write's report): until the peer's consumer has
 * passed it, the peer has bytes of ours unread (san_conn_peer_unread).
 */
static int commit(struct san_sock *s, bool data)
{
	int c;

	if (data && san_fault(SAN_FAULT_RING_GARBAGE) && s->prov == &san_prov_shm) {
		ring_garbage(s);
		return 0;
	}
	c = san_shm_ring_prod_commit(&s->txr);

	if (c == 1) {
		if (san_fault(SAN_FAULT_BELL_LATE) && s->prov == &san_prov_shm)
			(void)nanosleep(&(struct timespec){ 0, 300 * 1000 }, NULL);
		if (san_fault(SAN_FAULT_BELL_STUCK) && s->prov == &san_prov_shm)
			(void)nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
		s->prov->ring_peer(s);
	}
	if (c < 0) {
		ring_broken(s, "send", c);
		return -ECONNRESET;
	}
	if (!s->txr.hold)
		(void)cork_hold_end(s); /* its look covered the held frames (all published so far) */
	if (data)
		s->tx_data_end = s->txr.prod;
	return 0;
}

/* Reserve, encode (DATA: with its payload) and commit one message. 0, -EAGAIN, or an error. */
static int post(struct san_sock *s, const struct san_msg *m)
{
	void *buf;
	int room = san_shm_ring_prod_reserve(&s->txr, (uint32_t)san_msg_size(m), &buf);

	if (room < 0)
		return room;
	if (san_msg_encode(m, buf, (size_t)room) < 0)
		return -EINVAL;
	return commit(s, m->type == SAN_T_DATA || m->type == SAN_T_SRC_AVAIL ||
				 m->type == SAN_T_WRITE_DONE);
}

int san_conn_post_ctrl(struct san_sock *s, uint8_t type, uint16_t reason)
{
	struct san_msg m = { .type = type };

	if (type == SAN_T_ABORT)
		m.u.abort.reason = reason;
	return post(s, &m);
}

int san_conn_send_hello(struct san_sock *s)
{
	struct san_msg m = { .type = SAN_T_HELLO };
	int r;

	/*
	 * shm: the ring's byte space is the flow control (docs/protocol.md, shm provider); the
	 * geometry is the largest valid one, so credits never bind.
	 */
	/* We can read the peer's area (READ), and write into ours when the peer grants it. */
	m.u.hello.caps = (s->bulk_rx ? SAN_CAP_RDMA_READ : 0) | (s->bulk_tx ? SAN_CAP_RDMA_WRITE : 0);
	/* We read a sender's own buffer only if we can tell that it came from the peer. */
	if (san_cfg.direct && s->peer_pidfd >= 0)
		m.u.hello.caps |= SAN_CAP_DIRECT_READ;
	m.u.hello.pool = 65535;
	m.u.hello.threshold = 32767;
	m.u.hello.max_msg = s->rxr.max_msg;
	m.u.hello.nonce = s->nonce_peer;
	r = post(s, &m);
	if (r < 0 || !s->bulk_rx)
		return r;
	/*
	 * Right after HELLO, the standing write grant (protocol.md "GRANT on shm"): the peer may
	 * write into the whole of the area we read from, at offsets it chooses; a region is ours
	 * again when we release the WRITE_DONE that reported it.
	 */
	memset(&m, 0, sizeof(m));
	m.type = SAN_T_WRITE_GRANT;
	m.u.write_grant.len = s->bulk_size;
	m.u.write_grant.addr = s->bulk_addr; /* verbs: where to RDMA WRITE; shm: 0 */
	m.u.write_grant.key = s->bulk_key;
	r = post(s, &m);
	s->grant_sent = r == 0;
	return r;
}

/*
 * Ring bytes the socket buffer sizes still let us fill, when both applications set them
 * (sock_windows: our SO_SNDBUF, the peer's SO_RCVBUF in our outbound ring's header, written
 * there by the peer on shm, by our provider from the peer's RCV_WINDOW on verbs): at most
 * their sum stays unread, as TCP holds at most its send queue and the peer's receive queue.
 * Counted in ring bytes (frames with their headers), as the kernel counts its buffers with
 * their overhead. UINT64_MAX: no bound.
 */
static uint64_t window_limit(const struct san_sock *s)
{
	return (uint64_t)s->snd_window + san_shm_ring_peer_window(&s->txr);
}

static uint64_t window_room(struct san_sock *s)
{
	uint64_t cons, limit, used;

	int r;

	if (!s->snd_window || !s->txr.sh || !s->prov->peer_read_to)
		return UINT64_MAX;
	r = s->prov->peer_read_to(s, &cons);
	if (r == -EAGAIN)
		return 0; /* the peer's window is not known yet (verbs: its first RCV_WINDOW) */
	if (r < 0 || !san_shm_ring_peer_window(&s->txr))
		return UINT64_MAX; /* none; or broken: the send finds that out itself */
	limit = window_limit(s);
	used = san_shm_ring_prod_since(&s->txr, cons);
	return used < limit ? limit - used : 0;
}

/*
 * Corked (san_cork.h): a DATA frame is published without a look for a sleeping peer, until
 * this many bytes since the hold began (TCP sends a full segment while corked; this is well
 * under the ring, so the held frames never fill it).
 */
#define SAN_CONN_CORK_HOLD (16u * 1024)

static bool cork_holds(const struct san_sock *s)
{
	/*
	 * Held by this process alone: a hold and its end are counted by the process's cork tick
	 * (san_cork.c), and a fork-shared connection's could be begun by one and ended by the
	 * other (holders is raised under this lock, after the fork's prepare flushed the hold).
	 */
	return s->cork_on && s->prov == &san_prov_shm && !s->txr.hold &&
	       __atomic_load_n(&s->holders, __ATOMIC_ACQUIRE) == 1 && san_cork_usable() &&
	       !san_fault(SAN_FAULT_RING_GARBAGE) &&
	       (!s->bell_held || san_shm_ring_prod_since(&s->txr, s->bell_from) < SAN_CONN_CORK_HOLD);
}

void san_conn_cork_flush(struct san_sock *s)
{
	if (cork_hold_end(s) && s->txr.sh && !s->err && san_shm_ring_prod_wake(&s->txr) == 1)
		s->prov->ring_peer(s);
}

/* A DATA frame of send_copy: commit, its doorbell held while corked. */
static int commit_data(struct san_sock *s)
{
	uint64_t from = s->txr.prod;
	int c;

	if (!cork_holds(s))
		return commit(s, true);
	c = san_shm_ring_prod_commit_held(&s->txr);
	if (c < 0) {
		ring_broken(s, "send", c);
		return -ECONNRESET;
	}
	s->tx_data_end = s->txr.prod;
	if (!s->bell_held) {
		s->bell_held = true;
		s->bell_from = from;
		s->bell_tick = san_cork_now();
		if (!san_cork_begin())
			san_conn_cork_flush(s); /* no tick to bound it: rung now */
	}
	return 0;
}

/*
 * Copy through the ring: DATA frames of up to SAN_CONN_CHUNK bytes, as many as fit now, of the
 * total bytes of iov after its first skip.
 */
static ssize_t send_copy(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t skip,
			 size_t total)
{
	size_t sent = 0;

	while (sent < total) {
		size_t chunk = total - sent;
		struct san_msg m = { .type = SAN_T_DATA };
		uint64_t win = window_room(s);
		void *buf;
		int room, r;

		if (chunk > chunk_max(s))
			chunk = chunk_max(s);
		if (win != UINT64_MAX) {
			/* what the frame costs beyond its payload counts against the window too */
			size_t over;

			m.u.data.payload_len = 1;
			over = san_frame_len((uint32_t)san_msg_size(&m)) - 1;
			if (win <= over) {
				s->tx_wait_window = true; /* san_conn_tx_arm waits for the peer's reads */
				break;
			}
			if (chunk > win - over)
				chunk = (size_t)(win - over);
		}
		m.u.data.payload_len = (uint32_t)chunk;
		room = san_shm_ring_prod_reserve(&s->txr, (uint32_t)san_msg_size(&m), &buf);
		if (room == -EAGAIN)
			break;
		if (room < 0) {
			ring_broken(s, "send", room);
			return sent ? (ssize_t)sent : -ECONNRESET;
		}
		if (san_msg_encode(&m, buf, (size_t)room) < 0)
			return sent ? (ssize_t)sent : -EINVAL;
		san_conn_iov_copy(iov, iovcnt, skip + sent, san_msg_payload(buf, &m), chunk, false);
		r = commit_data(s);
		if (r < 0)
			return sent ? (ssize_t)sent : r;
		sent += chunk;
	}
	if (!sent)
		return -EAGAIN;
	if (san_stats_enabled() && !s->txr.hold) /* held: counted once moved (src_move) */
		count_san_tx(s, sent);
	return (ssize_t)sent;
}

/* Done with the frame at the read cursor: release it, and let a waiting producer go on. */
static int consume(struct san_sock *s)
{
	int c = san_shm_ring_cons_consume(&s->rxr);

	if (c == 1)
		s->prov->wake_producer(s);
	if (c < 0) {
		ring_broken(s, "receive", c);
		return -ECONNRESET;
	}
	return 0;
}

/* ---- READ, sending side ------------------------------------------------------------------ */

/*
 * The peer's HELLO: the capabilities in force (it may clear what it offered at setup, never
 * add). 0, or -ECONNRESET with the ring declared broken. The frame is consumed.
 */
static int take_hello(struct san_sock *s, const struct san_msg *m)
{
	if (s->hello_rx || m->u.hello.nonce != s->nonce_mine) {
		ring_broken(s, "HELLO", -SAN_PROTO_ENONCE);
		return -ECONNRESET;
	}
	if (!san_caps_hello_ok(s->peer_caps, m->u.hello.caps)) {
		ring_broken(s, "HELLO", -SAN_PROTO_ERANGE);
		return -ECONNRESET;
	}
	s->hello_rx = true;
	s->peer_caps = m->u.hello.caps;
	return consume(s);
}

/* The peer's standing WRITE_GRANT of our area (sent right after its HELLO), consumed. */
static int take_grant(struct san_sock *s, const struct san_msg *m)
{
	const struct san_write_grant *g = &m->u.write_grant;

	if (!s->bulk_tx && s->prov->grant_keys && s->hello_rx && !s->peer_grant)
		/* verbs: our area could not be registered, the peer's could: we send by copy */
		return consume(s);
	if (!s->hello_rx || s->peer_grant || !s->bulk_tx || g->decline || g->xfer_id || g->offset ||
	    (!s->prov->grant_keys && (g->addr || g->key)) || g->len != s->bulk_size) {
		ring_broken(s, "WRITE_GRANT", -SAN_PROTO_ERANGE);
		return -ECONNRESET;
	}
	s->peer_grant = true;
	s->peer_bulk_addr = g->addr;
	s->peer_bulk_key = (uint32_t)g->key;
	return consume(s);
}

/*
 * A sender that never reads still needs the peer's capabilities and grant: its HELLO and
 * WRITE_GRANT are the first frames of the inbound ring, so they are taken here if they wait
 * at the read cursor.
 */
static void take_head(struct san_sock *s)
{
	struct san_shm_frame f;
	struct san_msg m;

	while (!s->err && !s->peer_grant && !s->rx_off &&
	       san_shm_ring_cons_peek(&s->rxr, &f) == 0 &&
	       san_msg_decode(f.msg, f.len, SAN_CHAN_SESSION, s->rxr.max_msg, &m) == 0) {
		if (m.type == SAN_T_HELLO && !s->hello_rx)
			(void)take_hello(s, &m);
		else if (m.type == SAN_T_WRITE_GRANT)
			(void)take_grant(s, &m);
		else
			break;
	}
}

/*
 * "Register" our bulk area: commit its pages now (MADV_POPULATE_WRITE), so that memory that
 * cannot be had shows as an error here, where the send can still take another path, and never
 * as a fault later. Once per connection; a failure turns READ off for it.
 */
static bool bulk_register(struct san_sock *s)
{
	if (!s->bulk_tx || s->bulk_broken || san_fault(SAN_FAULT_REG_FAIL))
		return false;
	if (!s->bulk_ready) {
		if (madvise(s->bulk_tx, s->bulk_size, MADV_POPULATE_WRITE) < 0 && errno != EINVAL) {
			san_info("fd %d: bulk area (%llu KiB) not committed (%s): sending by copy",
				 s->fd, (unsigned long long)(s->bulk_size >> 10), strerror(errno));
			s->bulk_broken = true;
			return false;
		}
		s->bulk_ready = true; /* EINVAL: a kernel before 5.14, pages come at first touch */
	}
	return true;
}

/* How a send of total bytes (> SANSWITCH_INLINE_MAX) travels: READ, GRANT, COPY or -ENOBUFS. */
static int bulk_mode(struct san_sock *s, size_t total)
{
	struct san_bulk_in in = {
		.len = total,
		.inline_max = san_cfg.inline_max,
		.zcopy_min = san_cfg.bulk == SAN_CFG_BULK_READ ? san_cfg.inline_max + 1
							      : SAN_CONN_READ_MIN,
		.peer_caps = s->hello_rx ? s->peer_caps : 0,
		.policy = san_cfg.bulk == SAN_CFG_BULK_INLINE  ? SAN_BULK_COPY_ONLY
			  : san_cfg.bulk == SAN_CFG_BULK_GRANT ? SAN_BULK_NO_READ
							       : SAN_BULK_AUTO,
		.can_alloc = !san_fault(SAN_FAULT_ALLOC_FAIL),
	};

	take_head(s);
	in.peer_caps = s->hello_rx ? s->peer_caps : 0;
	/* We can write only into memory the peer granted. */
	in.local_caps = s->peer_grant ? SAN_CAP_RDMA_WRITE : 0;
	/* Only a send that could go by READ or GRANT commits the area's pages. */
	in.can_register = in.policy != SAN_BULK_COPY_ONLY &&
			  ((in.policy == SAN_BULK_AUTO && (in.peer_caps & SAN_CAP_RDMA_READ)) ||
			   in.local_caps) &&
			  bulk_register(s);
	return san_bulk_choose(&in);
}

/*
 * One READ or GRANT transfer (protocol.md "READ on shm", "GRANT on shm"): copy up to total
 * bytes (those after the first skip of iov) into a region of our bulk area, then FIRST DATA (the mode, the region's first byte)
 * and the message that hands over the rest (READ: SRC_AVAIL, "read it there"; GRANT:
 * WRITE_DONE, "written into your grant there"), both or neither. The region is ours again
 * once the peer releases that second frame. Returns the bytes taken; -EAGAIN with
 * tx_wait_area set when the area is full (wait for the peer to read), or clear when the ring
 * is (wait for ring space); -ECONNRESET.
 */
static ssize_t send_region(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t skip,
			   size_t total, int mode)
{
	bool grant = mode == SAN_XFER_GRANT;
	struct san_msg first = { .type = SAN_T_DATA },
		       sa = { .type = grant ? SAN_T_WRITE_DONE : SAN_T_SRC_AVAIL };
	uint64_t cons, off, len, max = s->bulk_size / 4;
	uint32_t both;
	void *p;
	int room;

	if (s->prov->area_released(s, &cons) < 0) {
		if (!s->err) /* (a provider that knows better has reset it already) */
			ring_broken(s, "send", -EPROTO);
		return -ECONNRESET;
	}
	san_stage_release(&s->stage, cons);
	if (s->region_max && max > s->region_max)
		max = s->region_max;
	len = san_stage_room(&s->stage, total < max ? total : max, SAN_CONN_REGION_MIN, &off);
	if (len < 2) {
		s->tx_wait_area = true;
		return -EAGAIN;
	}
	first.u.data.first = true;
	first.u.data.mode = grant ? SAN_XMODE_GRANT : SAN_XMODE_READ;
	first.u.data.total_len = len;
	first.u.data.xfer_id = s->xfer_tx_id + 1;
	first.u.data.payload_len = 1;
	if (grant) {
		sa.u.write_done.xfer_id = first.u.data.xfer_id;
		sa.u.write_done.status = SAN_XS_OK;
		sa.u.write_done.offset = off + 1;
		sa.u.write_done.len = len - 1;
	} else {
		sa.u.src_avail.xfer_id = first.u.data.xfer_id;
		sa.u.src_avail.addr = off + 1;
		sa.u.src_avail.len = len - 1;
	}
	/*
	 * Room for both frames, checked as one message of their combined frame length: whatever
	 * the padding at the ring's end, two frames fit where that one does.
	 */
	both = (uint32_t)(san_frame_len((uint32_t)san_msg_size(&first)) +
			  san_frame_len((uint32_t)san_msg_size(&sa)));
	room = san_shm_ring_prod_reserve(&s->txr, both, &p);
	if (room == -EAGAIN)
		return -EAGAIN;
	if (room < 0) {
		ring_broken(s, "send", room);
		return -ECONNRESET;
	}
	san_conn_iov_copy(iov, iovcnt, skip, s->bulk_tx + off, len, false);
	if (grant && s->prov->bulk_push) {
		/* the bytes go where the peer granted before the WRITE_DONE that says so */
		int r = s->prov->bulk_push(s, off + 1, len - 1);

		if (r == -EAGAIN) {
			s->tx_wait_area = true;
			return -EAGAIN;
		}
		if (r < 0)
			return -ECONNRESET;
	}
	first.u.data.payload = s->bulk_tx + off;
	room = post(s, &first);
	if (!room)
		room = post(s, &sa);
	if (room < 0) {
		/* both fit (checked above): anything else is a broken ring */
		if (!s->err)
			ring_broken(s, "send", room);
		return -ECONNRESET;
	}
	san_stage_push(&s->stage, off, len, s->prov->area_key(s));
	s->xfer_tx_id++;
	if (san_stats_enabled() && !s->txr.hold) {
		count_san_tx(s, len);
		san_stats_add(grant ? SAN_STAT_GRANT_TX_BYTES : SAN_STAT_READ_TX_BYTES, len);
	}
	return (ssize_t)len;
}

/*
 * May this process offer its own buffers (direct grant, direct read)? The peer writes into and
 * reads from the pid that proved itself at the switch, so only that process may, and only while
 * no other shares the connection (docs/engine.md §7.1): a fork child's buffer address names the
 * parent's memory there, and while both hold it, either may be the one whose call offered.
 */
static bool offers_ours(const struct san_sock *s)
{
	return !s->proc->from_fork && __atomic_load_n(&s->users, __ATOMIC_ACQUIRE) == 1;
}

/* Direct grants on this connection, by policy (SANSWITCH_DIRECT, SANSWITCH_BULK) and so far. */
static bool direct_on(const struct san_sock *s)
{
	return san_cfg.direct && !s->direct_off && s->hello_rx &&
	       (san_cfg.bulk == SAN_CFG_BULK_AUTO || san_cfg.bulk == SAN_CFG_BULK_GRANT);
}

/* May this send of total bytes go into the peer's offered buffer, if there is one? */
static bool direct_allowed(struct san_sock *s, size_t total)
{
	/* No capability to check: an offer is the peer's consent, and CMA's permission is
	 * learnt from the first write (a refusal turns direct off on both sides). */
	return direct_on(s) && total > san_cfg.inline_max &&
	       (san_cfg.bulk == SAN_CFG_BULK_GRANT || total >= SAN_CONN_DIRECT_MIN);
}

/*
 * The peer sleeps in a blocking receive and offered its buffer: claim the offer, write into
 * it with process_vm_writev (our application's bytes, straight into the peer application's
 * buffer: one copy in all), report with WRITE_DONE{the offer's id, offset 0, len}. Returns
 * the bytes delivered (the send may complete: the peer holds them), 0 when there is no offer
 * to take (or the write moved nothing), -ECONNRESET.
 */
static ssize_t send_direct(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t total)
{
	struct san_msg m = { .type = SAN_T_WRITE_DONE };
	struct san_shm_direct d;
	struct san_shm_cma_region dst;
	size_t done = 0;
	ssize_t w;
	void *buf;
	int room;

	/* Room for the WRITE_DONE first: once claimed, the report must go out. */
	room = san_shm_ring_prod_reserve(&s->txr, (uint32_t)san_msg_size(&m), &buf);
	if (room < 0 || san_shm_ring_direct_claim(&s->txr, &d) != 1)
		return 0; /* the normal path meets a full or broken ring again, and says so */
	dst.pid = s->peer_pid;
	dst.addr = d.addr;
	dst.len = d.len < total ? d.len : total;
	if (san_fault(SAN_FAULT_CMA_FAIL))
		w = -EPERM;
	else
		w = san_shm_cma_write(&dst, iov, (size_t)iovcnt, &done);
	if (w >= 0)
		done = (size_t)w;
	m.u.write_done.xfer_id = d.id;
	m.u.write_done.status = w >= 0 ? SAN_XS_OK : SAN_XS_FAILED;
	m.u.write_done.len = done;
	if (w < 0) {
		/* FAILED with the prefix that did arrive: the peer stops offering, so do we. */
		san_info("fd %d: direct write into the peer's buffer failed (%s): copying instead",
			 s->fd, strerror((int)-w));
		s->direct_off = true;
	}
	if (san_msg_encode(&m, buf, (size_t)room) < 0 || commit(s, true) < 0) {
		if (!s->err)
			ring_broken(s, "send", -EPROTO);
		return -ECONNRESET;
	}
	if (done && san_stats_enabled()) {
		count_san_tx(s, done);
		san_stats_add(SAN_STAT_DIRECT_TX_BYTES, done);
	}
	return (ssize_t)done;
}

/* ---- direct read, sending side ---------------------------------------------------------- */

/*
 * May this blocking send offer its buffer? Under auto and read, to a peer that reads offers
 * and whose application waits for data right now (its consumer is armed: it found the ring
 * empty), with a first buffer big enough to be worth the wait.
 */
static bool src_allowed(struct san_sock *s, const struct iovec *iov, size_t total)
{
	return san_cfg.direct && !s->src_off && s->hello_rx && offers_ours(s) &&
	       (s->peer_caps & SAN_CAP_DIRECT_READ) && total > san_cfg.inline_max &&
	       (san_cfg.bulk == SAN_CFG_BULK_AUTO || san_cfg.bulk == SAN_CFG_BULK_READ) &&
	       iov[0].iov_len >= SAN_CONN_SRC_MIN && san_shm_ring_cons_waiting(&s->txr);
}

/*
 * What a move (san_conn_src_move) of n bytes commits at once when our ring and area are empty:
 * by READ or GRANT all of n up to the area's size (regions of a quarter of it, a last byte as
 * DATA; their few frames fit any ring); by COPY as much as DATA frames of chunk_max() fill of
 * the ring from where it stands, PAD and all (as san_shm_ring_prod_reserve counts); nothing if
 * the send could not go (ENOBUFS). Lock held.
 */
static size_t move_room(struct san_sock *s, size_t n)
{
	const struct san_shm_prod *p = &s->txr;
	int mode = n > san_cfg.inline_max ? bulk_mode(s, n) : SAN_XFER_COPY;
	uint64_t at = p->prod, room = p->size;
	size_t fit = 0;

	if (mode == SAN_XFER_READ || mode == SAN_XFER_GRANT)
		return n < s->bulk_size ? n : (size_t)s->bulk_size;
	if (mode == -ENOBUFS)
		return 0;
	while (fit < n) {
		struct san_msg m = { .type = SAN_T_DATA };
		uint64_t flen, need;

		m.u.data.payload_len = (uint32_t)(n - fit < chunk_max(s) ? n - fit : chunk_max(s));
		flen = san_frame_len((uint32_t)san_msg_size(&m));
		need = flen + san_shm_ring_prod_pad(p, at, flen, at == p->prod);
		if (need > room)
			break;
		room -= need;
		at += need;
		fit += m.u.data.payload_len;
	}
	return fit;
}

/*
 * Offer iov[0] (of a send of total bytes) in the ring's source slot, plugged first so that the
 * peer's report (which drains our plugs) wakes us on X. The peer counts the offer as bytes it
 * holds (FIONREAD), and a count may not go down without a read, so the offer is never longer
 * than what its move would surely put into the ring if it is given up: what a move takes now
 * over an empty ring and area (move_room), both for the send's move (all of total) and for
 * the offer's alone (close, exec, shutdown on another thread). Nothing is offered unless the
 * ring and the area are empty (the peer waits for data: it read and released everything),
 * and while the offer is out nothing else is committed (other sends wait; a DISCONNECT or a
 * reset refuses the move) and the peer only releases, so the move finds at least that room.
 * -EINPROGRESS: offered, wait (san_conn_src_settle); 0: not offered (the slot is busy, the
 * ring or the area not empty, too little would be offered: go the usual way).
 */
static ssize_t send_src(struct san_sock *s, const struct iovec *iov, size_t total)
{
	uint64_t cons;
	size_t len, room;
	int r;

	if (s->prov->area_released(s, &cons) < 0 || cons != s->txr.prod)
		return 0;
	san_stage_release(&s->stage, cons);
	if (s->stage.n)
		return 0;
	len = move_room(s, total);
	if (len > iov[0].iov_len)
		len = iov[0].iov_len;
	room = move_room(s, len); /* (the offer's alone: its frames may split differently) */
	if (len > room)
		len = room;
	if (s->err || len < SAN_CONN_SRC_MIN)
		return 0;
	if (!++s->src_id)
		s->src_id = 1;
	plug(s);
	r = san_shm_ring_src_offer(&s->txr, s->src_id, (uint64_t)(uintptr_t)iov[0].iov_base, len);
	if (r < 0) {
		san_sock_unplug(s->ylocal);
		return 0;
	}
	if (r == 1)
		s->prov->ring_peer(s);
	s->src_out = true;
	s->src_len = len;
	s->src_buf = iov[0].iov_base;
	return -EINPROGRESS;
}

/*
 * Give our offer up, its bytes moved into the ring in the same step (protocol.md "Direct read
 * on shm"): the peer was woken for them (its X readable, FIONREAD counting them), so they may
 * not vanish from its view between the withdrawal and a later commit. The bytes (up to total,
 * from iov, which starts with the offered buffer) go the way a send would take them (READ or
 * GRANT through the area, or COPY), their frames committed but held, at the ring position the
 * offer names; san_shm_ring_src_move then turns the offer into MOVED (the consumer reads the
 * frames from then on) and publishes them, unless the peer claimed the offer first: then the
 * held frames and regions are dropped and the claim stands. Returns the bytes moved (the
 * offer settled; at least its length, which send_src saw to), or 0 (nothing moved: the offer
 * is as it was, and san_conn_src_settle decides). Lock held.
 */
ssize_t san_conn_src_move(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t total)
{
	struct san_stage stage0;
	uint32_t xid0 = s->xfer_tx_id;
	size_t sent = 0, last = 0;
	ssize_t r = 0;
	int mode = -1;

	if (!s->src_out || s->err || s->fin_sent || s->anchor_dead || !s->txr.sh || !total ||
	    atomic_load_explicit(&s->txr.sh->src, memory_order_acquire) !=
		    ((uint64_t)s->src_id << 32 | SAN_SHM_SRC_OFFERED))
		return 0;
	stage0 = s->stage;
	san_shm_ring_prod_hold(&s->txr);
	if (total > san_cfg.inline_max)
		mode = bulk_mode(s, total); /* (may read the peer's HELLO: a bad one resets) */
	if (s->err) {
		/* reset: nothing to move */
	} else if (mode == SAN_XFER_READ || mode == SAN_XFER_GRANT) {
		while (sent < total && (r = send_region(s, iov, iovcnt, sent, total - sent, mode)) > 0)
			sent += (size_t)r;
		/* a last byte makes no region (FIRST DATA carries one, the rest at least one) */
		if (sent && total - sent == 1 && !s->err && send_copy(s, iov, iovcnt, sent, 1) == 1)
			last = 1;
		sent += last;
	} else if (mode != -ENOBUFS) {
		r = send_copy(s, iov, iovcnt, 0, total);
		sent = r > 0 ? (size_t)r : 0;
	}
	/*
	 * Nothing to move; or the ring broke on the way (the reset dropped the held frames
	 * before its ABORT); or the peer claimed the offer meanwhile (the move drops them): as
	 * if we had not tried.
	 */
	if (s->err || !sent)
		san_shm_ring_prod_unhold(&s->txr);
	if (san_shm_ring_src_move(&s->txr, s->src_id) < 0) {
		s->stage = stage0;
		s->xfer_tx_id = xid0;
		return 0;
	}
	if (san_fault(SAN_FAULT_SRC_LATE))
		usleep(100000); /* moved, not yet published: the peer reads the frames anyway */
	if (san_shm_ring_src_publish(&s->txr) == 1)
		s->prov->ring_peer(s);
	s->src_out = false;
	san_sock_unplug(s->ylocal);
	pthread_cond_broadcast(&s->cond); /* sends that waited for the slot */
	if (san_stats_enabled()) {
		count_san_tx(s, sent);
		if (mode == SAN_XFER_READ || mode == SAN_XFER_GRANT)
			san_stats_add(mode == SAN_XFER_GRANT ? SAN_STAT_GRANT_TX_BYTES
							     : SAN_STAT_READ_TX_BYTES,
				      sent - last); /* (the last byte went as DATA) */
	}
	return (ssize_t)sent;
}

/*
 * After a wait: what became of our offer. Returns the bytes the peer read (the send moved
 * them), 0 if it took none (revoked: go through the area), -EINPROGRESS while it is out
 * (give_up revokes it unless the peer already claimed it: a claimed buffer is being read,
 * and the send may not return before the report), -ECONNRESET. Lock held.
 */
ssize_t san_conn_src_settle(struct san_sock *s, bool give_up)
{
	uint64_t got = 0;
	int st;

	if (!s->src_out) {
		/* another thread settled it (close, exec): the offering send's result is kept */
		ssize_t r = s->src_res_pending ? s->src_res : 0;

		s->src_res_pending = false;
		return r;
	}
	st = san_shm_ring_src_settle(&s->txr, s->src_id, s->src_len, give_up, &got);
	if (st == SAN_SHM_SRC_OFFERED || (st == SAN_SHM_SRC_CLAIMED && !s->anchor_dead))
		return -EINPROGRESS;
	s->src_out = false;
	san_sock_unplug(s->ylocal);
	pthread_cond_broadcast(&s->cond); /* sends that waited for the slot */
	if (st == SAN_SHM_SRC_FREE)
		return 0;
	if (st == SAN_SHM_SRC_CLAIMED) /* and the peer's process is gone */
		return -ECONNRESET;
	if (st < 0) {
		ring_broken(s, "direct read", -SAN_PROTO_ERANGE);
		return -ECONNRESET;
	}
	if (st == SAN_SHM_SRC_FAILED) {
		san_info("fd %d: the peer could not read our buffer: copying instead", s->fd);
		s->src_off = true;
	}
	if (got && san_stats_enabled()) {
		count_san_tx(s, got);
		san_stats_add(SAN_STAT_DREAD_TX_BYTES, got);
	}
	return (ssize_t)got;
}

/*
 * No more offers (exec, close, shutdown(SHUT_WR), from another thread than the offering send):
 * give ours up, its bytes moved into the ring (san_conn_src_move) or else taken back; one
 * being read is waited for, at most 2 s. What becomes of it is kept for the offering send
 * (san_conn_src_settle gives it the count moved or read, or the error), so that it neither
 * sends the bytes again nor reports a failure for bytes the peer has. A peer that claimed and
 * did not answer in 2 s (stopped mid-read) resets the connection. Lock held; dropped while
 * waiting.
 */
void san_conn_src_drop(struct san_sock *s)
{
	s->src_off = true;
	if (s->src_out) {
		/* the offering send waits in its call: its buffer is still valid */
		struct iovec one = { s->src_buf, s->src_len };
		ssize_t n = san_conn_src_move(s, &one, 1, s->src_len);

		if (n > 0) {
			s->src_res = n;
			s->src_res_pending = true;
			return;
		}
	}
	for (int i = 0; s->src_out; i++) {
		struct pollfd p = { san_sock_x_own(s), POLLOUT, 0 }; /* the report unplugs X */
		ssize_t r;

		if (i == 2000) {
			san_warn("fd %d: the peer claimed a send buffer and did not answer in 2 s",
				 s->fd);
			s->src_out = false;
			s->src_res = -ECONNRESET;
			s->src_res_pending = true;
			san_sock_reset_locked(s, -ECONNRESET, SAN_R_TIMEOUT);
			return;
		}
		r = san_conn_src_settle(s, true);
		if (r != -EINPROGRESS) {
			s->src_res = r;
			s->src_res_pending = r != 0;
			return;
		}
		pthread_mutex_unlock(&s->lock);
		(void)san_sys_poll(&p, 1, 1);
		san_sock_lock(s); /* the offering send may have settled it meanwhile */
	}
}

/*
 * A send after the peer's process let go of the connection, answered as TCP answers one to a
 * closed socket: a peer gone with our bytes unread reset the connection (ECONNRESET now); one
 * gone by FIN takes the first send, which nobody will read, and answers it with an RST
 * (EPIPE from then on: TCP's error after the peer's FIN). A peer whose reads are not seen
 * (verbs): EPIPE. Lock held.
 */
static ssize_t gone_send(struct san_sock *s, size_t total)
{
	if (s->peer_end == SK_PEER_RST) {
		/* TCP: ECONNRESET, or EPIPE once the peer's FIN had come (CLOSE_WAIT) */
		int e = s->peer_fin || san_conn_ctrl_ahead(s, SAN_T_DISCONNECT) ? -EPIPE : -ECONNRESET;

		san_sock_reset_locked(s, e, SAN_R_TCP);
		return e == -EPIPE ? san_sock_take_err(s, e) : e; /* (ECONNRESET: san_sock_sendmsg) */
	}
	if (s->peer_end != SK_PEER_FIN || s->gone_write)
		return -EPIPE;
	s->gone_write = true;
	san_sock_reset_locked(s, -EPIPE, SAN_R_TCP);
	s->err_told = false; /* the next call reports it */
	return (ssize_t)total;
}

ssize_t san_conn_send(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t total,
		      bool may_wait)
{
	if (san_fault(SAN_FAULT_FORK_DIE_LOCKED) && s->proc->from_fork)
		/* a process that shares the connection dies holding its lock (san_sock_owner_died) */
		(void)kill(getpid(), SIGKILL);
	if (s->fin_sent)
		return -EPIPE;
	if (s->peer_fin && !s->anchor_dead)
		/* the peer said its last word: learn now whether it is gone (one peek, rare) */
		san_sock_check_anchor(s);
	if (s->anchor_dead)
		return gone_send(s, total);
	if (s->src_out)
		return -EAGAIN; /* another thread's send is being read: nothing may pass it */
	/*
	 * A send that found no room armed and plugged X: until the peer releases something X
	 * polls unwritable, and so the send fails too (TCP: once the send buffer is full, no
	 * send succeeds before POLLOUT, however small). The flag stays as it was (area or ring).
	 */
	if (san_shm_ring_prod_armed(&s->txr) || s->tx_area_armed)
		return -EAGAIN;
	s->tx_wait_area = false;
	s->tx_wait_window = false;
	take_head(s);
	if (window_room(s) != UINT64_MAX)
		/* bounded by the buffer sizes: only what the ring holds counts, so through it */
		return send_copy(s, iov, iovcnt, 0, total);
	if (direct_allowed(s, total)) {
		ssize_t r = send_direct(s, iov, iovcnt, total);

		if (r != 0)
			return r; /* the rest, if any, in the next round */
	}
	if (may_wait && src_allowed(s, iov, total) && send_src(s, iov, total) == -EINPROGRESS)
		return -EINPROGRESS;
	if (total > san_cfg.inline_max) {
		int mode = bulk_mode(s, total);

		if (mode == -ENOBUFS)
			/* Nothing was sent: the connection stays usable, the application may retry. */
			return -ENOBUFS;
		if (mode == SAN_XFER_READ || mode == SAN_XFER_GRANT) {
			size_t sent = 0;
			ssize_t r = 0;

			/*
			 * Region after region while the area has room. -EAGAIN: a full area means
			 * the peer has not read yet; we wait for it rather than copy (the copy would
			 * only queue behind it).
			 */
			while (sent < total) {
				r = send_region(s, iov, iovcnt, sent, total - sent, mode);
				if (r < 0)
					break;
				sent += (size_t)r;
			}
			return sent ? (ssize_t)sent : r;
		}
	}
	return send_copy(s, iov, iovcnt, 0, total);
}

/* ---- direct grant, receiving side ------------------------------------------------------ */

/*
 * A blocking receive found the ring empty, armed, and is about to sleep: offer the buffer
 * (iov[0], if it is the only one and big enough) for the peer to write into. Lock held.
 */
void san_conn_direct_offer(struct san_sock *s, const struct iovec *iov, int iovcnt)
{
	if (!direct_on(s) || !offers_ours(s) || s->direct_out || iovcnt != 1 ||
	    iov[0].iov_len < SAN_CONN_DIRECT_MIN ||
	    !(s->peer_caps & SAN_CAP_RDMA_WRITE) || !s->rxr.sh || s->err || s->peer_fin || s->rd_shut)
		return;
	if (!++s->direct_id)
		s->direct_id = 1;
	if (san_shm_ring_direct_offer(&s->rxr, s->direct_id, (uint64_t)(uintptr_t)iov[0].iov_base,
				      iov[0].iov_len) < 0)
		return;
	s->direct_out = true;
	s->direct_claimed = false;
	s->direct_len = iov[0].iov_len;
	s->direct_buf = iov[0].iov_base;
}

/*
 * After a wait, before reading or returning: take an unclaimed offer back. Returns true if
 * the receive may return (nothing of ours is out), false while a claimed offer's WRITE_DONE
 * has not been read: the peer may be writing into the buffer, which must stay valid, or its
 * answer is the next frame, for the receive to read. A reset of ours with the answer there, or
 * the peer's process gone without one, ends that too (a dead peer writes nothing more). Lock
 * held.
 */
bool san_conn_direct_settle(struct san_sock *s)
{
	struct san_shm_frame f;

	if (!s->direct_out)
		return true;
	if (!s->direct_claimed && san_shm_ring_direct_revoke(&s->rxr)) {
		s->direct_out = false;
		return true;
	}
	s->direct_claimed = true;
	/*
	 * Claimed: the writer holds its lock from the claim to its WRITE_DONE, which is the next
	 * frame. Once a frame is there nothing more will land, and that frame is the answer: the
	 * receive reads it (direct_done checks it against this record, so the claim stays on
	 * record), unless a reset of ours ends the receive first. Without a frame, a reset of
	 * ours ends nothing by itself (the peer may be mid-write); only the writer's process
	 * being gone does (anchor EOF). An anchor EOF also follows the peer's orderly close,
	 * which comes after its WRITE_DONE (the claim holds its lock until that is committed):
	 * then the answer is there, and must be read, not forgotten (direct_done would reject it
	 * and reset the connection with the bytes already in the buffer).
	 */
	if (san_shm_ring_cons_peek(&s->rxr, &f) != -EAGAIN ? s->err : s->anchor_dead) {
		s->direct_out = s->direct_claimed = false;
		pthread_cond_broadcast(&s->cond);
		return true;
	}
	return false;
}

/*
 * No more offers on this connection (close, exec, shutdown of the read side, a reset on the
 * way out): take ours back, and if the peer claimed it wait until its write is over, at most
 * 2 s (process_vm_writev finishes before a stopped writer stops; only one stopped between its
 * claim and its write could outlast that). Lock held; dropped while waiting.
 */
void san_conn_direct_drop(struct san_sock *s)
{
	s->direct_off = true;
	for (int i = 0; i < 2000 && !san_conn_direct_settle(s); i++) {
		struct pollfd p = { san_sock_x_own(s), POLLIN, 0 };

		pthread_mutex_unlock(&s->lock);
		(void)san_sys_poll(&p, 1, 1);
		san_sock_lock(s); /* its owner may have consumed the answer meanwhile */
	}
	if (s->direct_out)
		san_warn("fd %d: the peer claimed a receive buffer and did not answer in 2 s", s->fd);
	s->direct_out = s->direct_claimed = false;
}

/* ---- direct read, receiving side --------------------------------------------------------- */

/*
 * The peer's blocking send offered its buffer at the read cursor of c (the ring is empty
 * there): read up to space bytes of it with process_vm_readv straight into iov. For a receive
 * (c is s->rxr, peek_only false) the offer is claimed first and reported after, which lets
 * the sender's send return; a peek reads without claiming and keeps the bytes only if the
 * offer was still out after the read (the sender's buffer was not released meanwhile).
 * The bytes count only if the peer's process still lives after the read: while its pidfd
 * says so, the pid we read from was never reused. Returns the bytes read, 0 (no offer, or
 * nothing to keep), -EAGAIN (no offer, but frames came: the sender moved its offer into the
 * ring, peek again), -ECONNRESET (the peer died). Lock held.
 */
static ssize_t src_read(struct san_sock *s, struct san_shm_cons *c, const struct iovec *iov,
			int iovcnt, size_t space, bool peek_only)
{
	struct san_shm_src o;
	struct san_shm_cma_region r;
	size_t done = 0;
	ssize_t n;
	bool alive;
	int k;

	if (!san_cfg.direct || s->peer_pidfd < 0 || s->rd_shut || s->err || !space)
		return 0;
	k = san_shm_ring_src_find(c, &o);
	if (k != 1)
		return k == 2 ? -EAGAIN : 0; /* moved into the ring: look there */
	if (!peek_only && !san_shm_ring_src_claim(c, &o))
		/* revoked meanwhile: moved into the ring (look again), or it comes later */
		return san_shm_ring_src_find(c, &o) == 2 ? -EAGAIN : 0;
	r.pid = s->peer_pid;
	r.addr = o.addr;
	r.len = o.len < space ? o.len : space;
	n = san_fault(SAN_FAULT_CMA_FAIL) ? -EPERM : san_shm_cma_read(&r, iov, (size_t)iovcnt, &done);
	if (n >= 0)
		done = (size_t)n;
	alive = !san_pidfd_exited(s->peer_pidfd);
	if (peek_only) {
		if (alive && san_shm_ring_src_still(c, &o))
			return (ssize_t)done;
		return san_shm_ring_src_find(c, &o) == 2 ? -EAGAIN : 0;
	}
	if (!alive) {
		/* what we read may be another process's: deliver none of it */
		san_shm_ring_src_report(c, &o, false, 0);
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
		return -ECONNRESET;
	}
	if (n < 0)
		/* the sender takes back what we did not read, and offers no more */
		san_info("fd %d: direct read from the peer's buffer failed (%s): it copies instead",
			 s->fd, strerror((int)-n));
	san_shm_ring_src_report(c, &o, n >= 0, done);
	s->prov->wake_producer(s); /* the sender waits on its X */
	return (ssize_t)done;
}

/*
 * A WRITE_DONE outside a transfer answers our direct offer: its len bytes are already at the
 * start of the buffer we offered, which must be the caller's iov[0] with nothing delivered
 * before it (a claim is current only on an empty ring). Returns those bytes (the frame
 * consumed), -EBUSY if the caller is another receive (not consumed: san_conn_recv returns
 * -EBUSY, and that receive waits on s->cond or says EAGAIN), -EPROTO if the frame does not
 * match the offer.
 */
static ssize_t direct_done(struct san_sock *s, const struct san_msg *m, const struct iovec *iov,
			   size_t got)
{
	const struct san_write_done *wd = &m->u.write_done;

	if (!s->direct_out || !s->direct_claimed)
		return -EPROTO;
	if (iov[0].iov_base != s->direct_buf)
		return -EBUSY;
	if (got || wd->xfer_id != s->direct_id || wd->offset || wd->len > s->direct_len ||
	    (wd->status != SAN_XS_OK && wd->status != SAN_XS_FAILED) ||
	    (wd->status == SAN_XS_OK && !wd->len))
		return -EPROTO;
	if (wd->status == SAN_XS_FAILED)
		s->direct_off = true; /* the peer could not write: stop offering */
	s->direct_out = s->direct_claimed = false;
	san_shm_ring_direct_done(&s->rxr);
	pthread_cond_broadcast(&s->cond); /* receives that waited for this answer (-EBUSY) */
	if (consume(s) < 0)
		return -EPROTO;
	return (ssize_t)wd->len;
}

/* A FIRST DATA names a transfer mode we offered (READ: we map the peer's area; GRANT: ours). */
static bool first_mode_offered(const struct san_sock *s, const struct san_msg *m)
{
	return !m->u.data.first || (m->u.data.mode == SAN_XMODE_READ && s->bulk_rx) ||
	       (m->u.data.mode == SAN_XMODE_GRANT && s->grant_sent);
}

/*
 * A transfer's second frame (SRC_AVAIL or WRITE_DONE) matches what its FIRST DATA announced
 * (id, the rest's length, the mode) and lies inside the peer's area. Decoded from memory the
 * peer can write, so checked at every look. *addr, *len: where the rest is.
 */
static bool xfer_rest_ok(const struct san_sock *s, const struct san_msg *m, uint32_t id,
			 uint64_t rest, uint8_t mode, uint64_t *addr, uint64_t *len)
{
	bool rd = m->type == SAN_T_SRC_AVAIL;

	*addr = rd ? m->u.src_avail.addr : m->u.write_done.offset;
	*len = rd ? m->u.src_avail.len : m->u.write_done.len;
	return (rd ? m->u.src_avail.xfer_id : m->u.write_done.xfer_id) == id && *len == rest &&
	       mode == (rd ? SAN_XMODE_READ : SAN_XMODE_GRANT) &&
	       (rd ? m->u.src_avail.key == 0 : m->u.write_done.status == SAN_XS_OK) &&
	       *addr <= s->bulk_size && *len <= s->bulk_size - *addr;
}

/*
 * MSG_PEEK across frames: copy into iov what the ring holds for the application, from the
 * read cursor on, without consuming anything (TCP's peek sees every queued byte, so a program
 * peeking for a header that came in two sends must see both). It walks a private copy of the
 * consumer, at most SAN_CONN_PEEK_WALK frames, and stops at the first frame it does not simply
 * understand (session messages are skipped; DISCONNECT, ABORT or anything odd end the peek):
 * san_conn_recv's checks then decide about that frame. A transfer's rest is read only where
 * its FIRST DATA says it is and only inside the peer's area. Returns the bytes copied (with
 * iov NULL: counted, for FIONREAD).
 */
#define SAN_CONN_PEEK_WALK 256

static size_t peek_walk(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t space,
			bool *cut);

static size_t peek(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t space)
{
	return peek_walk(s, iov, iovcnt, space, &(bool){ false });
}

/* peek(); *cut: the walk stopped at SAN_CONN_PEEK_WALK frames with more behind them. */
static size_t peek_walk(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t space,
			bool *cut)
{
	struct san_shm_cons c = s->rxr;
	struct san_shm_frame f;
	struct san_msg m;
	size_t got = 0;
	uint64_t rx_off = s->rx_off, xfer_off = s->xfer_rx_off, rest = s->xfer_rx_rest;
	uint32_t id = s->xfer_rx_id;
	bool open = s->xfer_rx_open;
	uint8_t mode = s->xfer_rx_mode;
	bool hello = s->hello_rx; /* no DATA before HELLO (the reader checks HELLO itself) */
	int i = 0, r = 0;

again:
	for (; i < SAN_CONN_PEEK_WALK && got < space &&
	       (r = san_shm_ring_cons_peek(&c, &f)) == 0; i++) {
		const uint8_t *src = NULL; /* a DATA payload, in the ring */
		bool bulk = false;	   /* or a transfer's rest, at baddr of the peer's area */
		uint64_t len = 0, off = 0, baddr = 0;

		if (san_msg_decode(f.msg, f.len, SAN_CHAN_SESSION, c.max_msg, &m) < 0)
			break;
		if (open && m.type != SAN_T_SRC_AVAIL && m.type != SAN_T_WRITE_DONE)
			break;
		if (m.type == SAN_T_HELLO)
			hello = true;
		if (m.type == SAN_T_DATA) {
			if (!hello || !first_mode_offered(s, &m))
				break;
			src = (const uint8_t *)f.msg + m.wire_len - m.u.data.payload_len;
			len = m.u.data.payload_len;
			off = rx_off;
			if (m.u.data.first) {
				open = true;
				mode = m.u.data.mode;
				id = m.u.data.xfer_id;
				rest = m.u.data.total_len - m.u.data.payload_len;
				xfer_off = 0;
			}
		} else if (m.type == SAN_T_SRC_AVAIL || m.type == SAN_T_WRITE_DONE) {
			uint64_t addr;

			if (!open || !xfer_rest_ok(s, &m, id, rest, mode, &addr, &len))
				break;
			bulk = true;
			baddr = addr;
			off = xfer_off;
			open = false;
		} else if (m.type != SAN_T_HELLO && m.type != SAN_T_WRITE_GRANT &&
			   m.type != SAN_T_CREDIT_UPDATE && m.type != SAN_T_KEEPALIVE) {
			break;
		}
		if ((src || bulk) && len > off) {
			size_t n = len - off < space - got ? (size_t)(len - off) : space - got;

			if (iov && bulk) {
				if (s->prov->bulk_copy(s, mode == SAN_XMODE_READ, true, baddr + off,
						       baddr + len, iov, iovcnt, got, n) < 0)
					break;
			} else if (iov)
				san_conn_iov_copy(iov, iovcnt, got, (void *)(src + off), n, true);
			got += n;
		}
		if ((src || bulk) && len < off)
			break; /* shrunk under a partial read: the reader will say so */
		rx_off = 0; /* only the frames at the read cursor are partly read */
		if (m.type != SAN_T_DATA)
			xfer_off = 0;
		if (san_shm_ring_cons_skip(&c) < 0)
			break;
	}
	/* The end of the ring, and a sender's offer there: its bytes come next. */
	if (r == -EAGAIN && got < space && !open && hello) {
		struct san_shm_src o;
		ssize_t n = 0;

		if (!iov) {
			int k = san_shm_ring_src_find(&c, &o);

			if (k == 1)
				got += o.len < space - got ? (size_t)o.len : space - got;
			n = k == 2 ? -EAGAIN : 0;
		} else if (!got) {
			n = src_read(s, &c, iov, iovcnt, space, true);
			if (n > 0)
				got = (size_t)n;
		}
		if (n == -EAGAIN && i < SAN_CONN_PEEK_WALK) {
			/* the offer was moved into the ring meanwhile: its frames are there */
			r = 0;
			goto again;
		}
	}
	*cut = i == SAN_CONN_PEEK_WALK && got < space &&
	       san_shm_ring_cons_peek(&c, &(struct san_shm_frame){ 0 }) == 0;
	san_shm_ring_cons_known(&s->rxr, &c);
	return got;
}

/*
 * Deliver what the ring holds, in order: DATA payloads into iov, session messages handled on
 * the way (MSG_PEEK: see peek()). Returns bytes, 0 at the peer's DISCONNECT, -EAGAIN when
 * empty, -ECONNRESET.
 */
ssize_t san_conn_recv(struct san_sock *s, const struct iovec *iov, int iovcnt, int flags)
{
	size_t space = 0, got = 0;

	for (int i = 0; i < iovcnt; i++)
		space += iov[i].iov_len;
	if ((flags & MSG_PEEK) && space && !s->err && !s->peer_fin) {
		take_head(s); /* a peek walks past the peer's grant: verbs reads by its key */
		got = peek(s, iov, iovcnt, space);
		if (got)
			return (ssize_t)got; /* a peek moves nothing: no statistics */
	}
	while (!s->err && !s->peer_fin && (got < space || !space)) {
		struct san_shm_frame f;
		struct san_msg m;
		int r = san_shm_ring_cons_peek(&s->rxr, &f);

		if (r == -EAGAIN) {
			ssize_t n;

			/* Empty: a blocked sender may have offered its buffer (direct read). */
			if (got || s->xfer_rx_open || !s->hello_rx)
				break;
			if (!space) {
				struct san_shm_src o;

				if (san_shm_ring_src_find(&s->rxr, &o) != 0)
					return 1;
				break;
			}
			n = src_read(s, &s->rxr, iov, iovcnt, space, (flags & MSG_PEEK) != 0);
			if (n == -EAGAIN)
				continue; /* the offer was moved into the ring: read it there */
			if (n < 0)
				return san_sock_take_err(s, 0);
			got = (size_t)n;
			break;
		}
		if (r < 0) {
			ring_broken(s, "receive", r);
			break;
		}
		r = san_msg_decode(f.msg, f.len, SAN_CHAN_SESSION, s->rxr.max_msg, &m);
		if (r < 0) {
			ring_broken(s, "receive", r);
			break;
		}
		if (s->xfer_rx_open && m.type != SAN_T_SRC_AVAIL && m.type != SAN_T_WRITE_DONE) {
			/* a transfer's FIRST DATA and its SRC_AVAIL / WRITE_DONE are adjacent */
			ring_broken(s, san_type_name(m.type) ? san_type_name(m.type) : "message",
				    -SAN_PROTO_ETYPE);
			continue;
		}
		switch (m.type) {
		case SAN_T_HELLO:
			(void)take_hello(s, &m);
			continue;
		case SAN_T_DATA: {
			const uint8_t *pl = (const uint8_t *)f.msg + m.wire_len - m.u.data.payload_len;
			size_t n;

			/* Decoded again from memory the peer can write: it may not shrink under us. */
			if (s->rx_off > m.u.data.payload_len) {
				ring_broken(s, "DATA", -SAN_PROTO_ELENGTH);
				continue;
			}
			n = m.u.data.payload_len - s->rx_off;

			if (!s->hello_rx || !first_mode_offered(s, &m)) {
				/* before HELLO, or a transfer mode we never offered */
				ring_broken(s, "DATA", -SAN_PROTO_ERANGE);
				continue;
			}
			if (!space)
				return 1; /* a zero-length read only asks whether data is there */
			if (n > space - got)
				n = space - got;
			san_conn_iov_copy(iov, iovcnt, got, (void *)(pl + s->rx_off), n, true);
			got += n;
			if (flags & MSG_PEEK)
				goto out;
			s->rx_off += (uint32_t)n;
			if (s->rx_off == m.u.data.payload_len) {
				s->rx_off = 0;
				if (m.u.data.first) {
					/* the rest of the transfer is the SRC_AVAIL that follows */
					s->xfer_rx_open = true;
					s->xfer_rx_mode = m.u.data.mode;
					s->xfer_rx_id = m.u.data.xfer_id;
					s->xfer_rx_rest = m.u.data.total_len - m.u.data.payload_len;
					s->xfer_rx_off = 0;
				}
				(void)consume(s);
			}
			continue;
		}
		case SAN_T_WRITE_DONE:
			if (!s->xfer_rx_open) {
				/* not a transfer's second frame: the answer to our direct offer */
				ssize_t n = direct_done(s, &m, iov, got);

				if (n == -EBUSY) {
					/* another receive's offer: leave it for that one */
					if (!got)
						return -EBUSY;
					goto out;
				}
				if (n < 0) {
					ring_broken(s, "WRITE_DONE", -SAN_PROTO_ERANGE);
					continue;
				}
				got += (size_t)n;
				continue;
			}
			/* fall through */
		case SAN_T_SRC_AVAIL: {
			uint64_t addr, len;
			size_t n;

			if (!s->xfer_rx_open || !xfer_rest_ok(s, &m, s->xfer_rx_id, s->xfer_rx_rest,
							      s->xfer_rx_mode, &addr, &len)) {
				ring_broken(s, san_type_name(m.type), -SAN_PROTO_ERANGE);
				continue;
			}
			if (!space)
				return 1;
			n = len - s->xfer_rx_off;
			if (n > space - got)
				n = space - got;
			/* Straight from the peer's area into the caller's buffer. */
			if (s->prov->bulk_copy(s, s->xfer_rx_mode == SAN_XMODE_READ,
					       flags & MSG_PEEK, addr + s->xfer_rx_off, addr + len,
					       iov, iovcnt, got, n) < 0) {
				if (!s->err)
					san_sock_reset_locked(s, -ECONNRESET, SAN_R_CHANNEL);
				continue; /* what came before is still the caller's */
			}
			got += n;
			if (flags & MSG_PEEK)
				goto out;
			s->xfer_rx_off += n;
			if (s->xfer_rx_off == len) {
				/*
				 * Releasing the frame is the READ_DONE (READ), or gives the granted
				 * region back (GRANT): the sender may reuse it.
				 */
				s->xfer_rx_open = false;
				if (s->prov->xfer_done)
					s->prov->xfer_done(s, s->xfer_rx_id);
				(void)consume(s);
			}
			continue;
		}
		case SAN_T_WRITE_GRANT:
			(void)take_grant(s, &m);
			continue;
		case SAN_T_DISCONNECT:
			if (got)
				goto out; /* the data first; EOF on the next call */
			s->peer_fin = true;
			(void)consume(s);
			/*
			 * The peer shuts our Y's sending side with its DISCONNECT (X: POLLRDHUP), a
			 * moment after the frame is in the ring: a poll right after this EOF must
			 * see the FIN's flags already, as TCP's does.
			 */
			if (s->ylocal >= 0)
				(void)san_sys_shutdown(s->ylocal, SHUT_WR);
			break;
		case SAN_T_ABORT:
			(void)consume(s);
			san_sock_reset_by_peer(s, m.u.abort.reason);
			break;
		case SAN_T_CREDIT_UPDATE:
		case SAN_T_KEEPALIVE:
			(void)consume(s);
			continue;
		default:
			ring_broken(s, san_type_name(m.type) ? san_type_name(m.type) : "message",
				    -SAN_PROTO_ETYPE);
			continue;
		}
	}
out:
	if (got) {
		if (san_stats_enabled() && !(flags & MSG_PEEK)) {
			san_stats_add(SAN_STAT_SAN_RX_BYTES, got);
			if (s->proc->stc)
				san_stats_conn_add(&s->proc->stc->san_rx, got);
		}
		rx_trim_bells(s);
		return (ssize_t)got;
	}
	if (!s->err && s->anchor_dead && !s->peer_fin &&
	    san_shm_ring_cons_peek(&s->rxr, &(struct san_shm_frame){ 0 }) == -EAGAIN) {
		/*
		 * The anchor ended and no DISCONNECT came: the peer's process let go of the
		 * connection without a word (san_sock_check_anchor), and we have read all it
		 * sent. It ends here as its kernel would have ended TCP: a FIN, or an RST (also
		 * when it went between a transfer's two frames: the rest will never come).
		 */
		if (s->peer_end == SK_PEER_FIN && !s->xfer_rx_open)
			s->peer_fin = true;
		else
			san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
	}
	if (s->peer_fin)
		return 0;
	if (s->err)
		/* TCP reports a reset once; after that the stream reads as ended */
		return san_sock_take_err(s, 0);
	return -EAGAIN;
}

bool san_conn_ctrl_ahead(struct san_sock *s, uint8_t type)
{
	struct san_shm_cons c = s->rxr;
	struct san_shm_frame f;
	struct san_msg m;
	int r;

	if (!c.sh)
		return false;
	/* bounded: every frame is at least a header long, and the walk stops at prod */
	while ((r = san_shm_ring_cons_peek(&c, &f)) == 0) {
		if (san_msg_decode(f.msg, f.len, SAN_CHAN_SESSION, c.max_msg, &m) < 0)
			return type == SAN_T_ABORT; /* a broken ring resets anyway */
		if (m.type == type)
			break;
		if (san_shm_ring_cons_skip(&c) < 0)
			return type == SAN_T_ABORT;
	}
	san_shm_ring_cons_known(&s->rxr, &c);
	if (!r)
		return true;
	return r != -EAGAIN && type == SAN_T_ABORT;
}

bool san_conn_peer_unread(struct san_sock *s)
{
	uint64_t cons;

	if (!s->txr.sh)
		return false;
	/* a ring the peer broke cannot say: a reset, as for any broken ring */
	if (san_shm_ring_prod_released(&s->txr, &cons) < 0)
		return true;
	return cons < s->tx_data_end;
}

bool san_conn_rx_ready(struct san_sock *s)
{
	struct san_shm_frame f;

	if (s->err || s->peer_fin || s->anchor_dead || !s->rxr.sh)
		return true;
	return san_shm_ring_cons_peek(&s->rxr, &f) != -EAGAIN ||
	       san_shm_ring_src_find(&s->rxr, &(struct san_shm_src){ 0 }) != 0;
}

/* FIONREAD: the bytes the ring holds for the application, as TCP counts its queue (peek()). */
size_t san_conn_rx_bytes(struct san_sock *s)
{
	bool cut = false;
	size_t n = peek_walk(s, NULL, 0, INT32_MAX, &cut);

	if (!n)
		return 0;
	rx_trim_bells(s);
	/*
	 * Fewer bytes than the ring holds (the walk is bounded): a reader that reads exactly
	 * this much and then waits for an edge, as nginx does, would wait with data in the
	 * ring, whose doorbells it has had already. One more doorbell is the edge it waits for.
	 */
	if (cut && s->want_edges) {
		s->edge_seen = UINT64_MAX; /* (and for a wait that watches the ring: san_rxwatch.c) */
		ring_self(s);
	}
	return n;
}

/*
 * Take the doorbells off X: how many (zero-length messages); -1 once X is shut for good. Up to
 * SAN_CONN_DRAIN_BATCH at a time, in one system call: the common drain takes the one doorbell there is
 * and learns that it was the last from the same call's short count, where a receive per
 * message needed a second one to meet EAGAIN (an edge-triggered consumer, nginx, drains at
 * every request).
 */
#define SAN_CONN_DRAIN_BATCH 16 /* (1 KiB of stack: a receive may run on a signal stack) */

static int rx_drain(struct san_sock *s);

int san_conn_rx_drain_bells(struct san_sock *s)
{
	return rx_drain(s);
}

static int rx_drain(struct san_sock *s)
{
	struct mmsghdr v[SAN_CONN_DRAIN_BATCH];
	struct iovec io = { NULL, 0 }; /* a doorbell has no bytes; anything else is cut off */
	int bells = 0;
	bool asked = false;

	for (int i = 0; i < SAN_CONN_DRAIN_BATCH; i++)
		v[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &io, .msg_iovlen = 1 } };
	for (int round = 0; round < 1024 / SAN_CONN_DRAIN_BATCH; round++) {
		int r = (int)san_sys_recvmmsg(s->xfd, v, SAN_CONN_DRAIN_BATCH, MSG_DONTWAIT);

		if (r <= 0)
			break;
		for (int i = 0; i < r; i++)
			bells += !(v[i].msg_hdr.msg_flags & MSG_TRUNC);
		/*
		 * A doorbell reads as 0 bytes, and so does X once the peer's FIN shut it
		 * (san_sock_fin_sent): then it is readable for good, as TCP after a FIN, and
		 * would fill every batch.
		 */
		if (!asked && bells >= 8) {
			struct pollfd p = { s->xfd, POLLRDHUP, 0 };

			asked = true;
			if (san_sys_poll(&p, 1, 0) > 0 && (p.revents & POLLRDHUP))
				return -1;
		}
		if (r < SAN_CONN_DRAIN_BATCH)
			break; /* the queue is empty: no call to meet EAGAIN */
	}
	return bells;
}

/*
 * Take the doorbells off X, our flag down first and those owed included (below). The caller
 * then arms (the ring is empty) or rings X itself (it is not), so that X reads as ready
 * exactly while the ring holds something; or, a read that will not sleep, leaves the flag
 * down (san_conn_rx_unarm: the connection goes quiet).
 */
static void rx_take_bells(struct san_sock *s)
{
	struct san_shm_cons *c = &s->rxr;
	int max_waits;

	/*
	 * Flag down first: while it is down no producer takes it, so the doorbells owed are
	 * known (bells_due) and no new one can start. A producer takes the flag, then rings
	 * with a send(): between the two the frame is in the ring, and a reader that does
	 * not wait for X (a nonblocking read loop, FIONREAD) reads it and comes here before
	 * the doorbell lands. Drained then, X would turn readable a moment later over an empty
	 * ring (poll/epoll say POLLIN, the read says EAGAIN: wrk counts a read error). So wait
	 * for the owed doorbells to land (microseconds: the peer is between two instructions
	 * and a system call) and take them off too; bounded (SAN_CONN_BELL_WAITS).
	 */
	san_shm_ring_cons_unarm(c);
	san_shm_ring_cons_bells_drained(c);
	/*
	 * Nothing owed: X holds no doorbell, so no system call. On shm every doorbell is rung
	 * by a producer that took our flag (counted in bells_due by the unarm above, or by the
	 * arm that found data), or by ourselves (ring_self counts it too), unless the consumer
	 * asked for one per commit (want_edges: those take no flag, so only the drain knows).
	 * A request/response connection whose waits watch its ring (core/san_rxwatch.h) has
	 * its flag down while the peer commits: no doorbell, and no receive here (there were
	 * two per request, a doorbell and an EAGAIN).
	 */
	if (!c->bells_due && !c->bells_late && !s->want_edges && s->prov &&
	    s->prov->wire == SAN_PROV_SHM)
		return;
	/*
	 * Given up: at worst, one spurious wake-up later. The flag is in memory the peer can
	 * write: one that keeps clearing it would make every wait here run out, so after
	 * SAN_CONN_BELL_GIVEUPS of them the connection waits no more.
	 */
	max_waits = c->bell_giveups < SAN_CONN_BELL_GIVEUPS ? SAN_CONN_BELL_WAITS : 0;
	for (int waits = 0;; waits++) {
		int n = rx_drain(s);

		if (n < 0)
			break;
		if ((uint32_t)n >= c->bells_due) {
			/* the rest were late ones landing now (not waited for) */
			n -= (int)c->bells_due;
			c->bells_late -= (uint32_t)n < c->bells_late ? (uint32_t)n : c->bells_late;
			break;
		}
		c->bells_due -= (uint32_t)n;
		if (waits == max_waits) {
			if (max_waits) {
				san_debug("fd %d: %u doorbell(s) owed did not land within %d ms",
					  s->fd, c->bells_due, SAN_CONN_BELL_WAITS);
				c->bell_giveups++;
			}
			/*
			 * Still owed: one that lands later would leave X readable over an empty
			 * ring, so the next arm drains X for it even with nothing else owed.
			 */
			c->bells_late += c->bells_due;
			break;
		}
		(void)san_sys_poll(&(struct pollfd){ s->xfd, POLLIN, 0 }, 1, 1);
	}
	c->bells_due = 0;
}

bool san_conn_rx_unarm(struct san_sock *s)
{
	rx_take_bells(s);
	return !s->rxr.bells_late;
}

/* The doorbells off X, then the flag up and a look (san_shm_ring_cons_arm), counted on shm. */
static int cons_arm(struct san_sock *s)
{
	int r;

	rx_take_bells(s);
	r = san_shm_ring_cons_arm(&s->rxr);
	if (r >= 0 && s->prov && s->prov->wire == SAN_PROV_SHM)
		san_stats_add(SAN_STAT_SHM_ARMS, 1);
	return r;
}

/*
 * About to sleep until data comes: take the doorbells off X (only now that the ring is
 * empty, so X never reads as empty while frames wait), arm, re-check. 1: something came
 * (do not sleep); 0: armed.
 */
static int rx_arm(struct san_sock *s, bool tick);

/*
 * Who stands behind the flag an arm puts up (san_sock_proc.rx_armer), given whether it was up
 * already: a flag still up keeps the other waiter that stood behind it (a nonblocking read's
 * arm, or another thread's blocking receive, after a thread's epoll_wait went to sleep on it,
 * adds nobody that could take it down under that sleeper); a wait that sleeps without watching
 * the ring is behind it whatever stood there before.
 */
static void armer_set(struct san_sock *s, bool was_up, uintptr_t who)
{
	uintptr_t prev = s->proc->rx_armer;

	if (was_up && prev != 0 && prev != who && who != SAN_RX_ARMER_SLEEPER)
		return;
	s->proc->rx_armer = who;
}

int san_conn_rx_arm(struct san_sock *s)
{
	armer_set(s, s->rxr.armed, 0);
	return rx_arm(s, false);
}

int san_conn_rx_arm_mine(struct san_sock *s)
{
	armer_set(s, s->rxr.armed, (uintptr_t)pthread_self());
	return rx_arm(s, false);
}

int san_conn_rx_arm_sleeper(struct san_sock *s)
{
	armer_set(s, s->rxr.armed, SAN_RX_ARMER_SLEEPER);
	return rx_arm(s, false);
}

int san_conn_rx_rearm(struct san_sock *s)
{
	return rx_arm(s, false);
}

int san_conn_rx_arm_tick(struct san_sock *s)
{
	armer_set(s, s->rxr.armed, 0);
	return rx_arm(s, true);
}

static int rx_arm(struct san_sock *s, bool tick)
{
	struct san_shm_cons *c = &s->rxr;
	int r;

	/* The end of the stream or a reset: X stays ready (the doorbell that said so stays on it). */
	if (s->err || s->peer_fin || s->anchor_dead)
		return 1;
	/* (an edge-triggered one's doorbell per commit, which a watch took down: up before the look) */
	san_rxwatch_edges_up(s);
	r = cons_arm(s);
	if (r == 1) {
		/*
		 * We took the doorbells: the data found must keep X readable if left unread; the
		 * producer's doorbell does that when it took our flag first (bells_due counts it).
		 * Not by the quiet tick for an edge-triggered registration that was reported all
		 * of it already (edge_seen): a new edge for bytes it chose to leave unread would
		 * wake it for nothing, again at each tick (core/san_rxwatch.c). Every other arm
		 * rings: X is also what poll, select, a fork's other process and waits the
		 * preload cannot see take for "readable" (a poll after a read that left bytes
		 * slept over them).
		 */
		if (!c->bell_coming && s->ylocal >= 0 &&
		    !(tick && s->et_watch && c->prod == s->edge_seen))
			ring_self(s);
	}
	/*
	 * No longer quiet, now that X says what the ring holds (not before: a wait that found no
	 * quiet connection would look at the kernel before the ring above reached X).
	 */
	san_rxwatch_quiet_end(s);
	return r == 0 ? 0 : 1;
}

/*
 * The same, for a wait that watches the ring itself (core/san_rxwatch.c): data found is the
 * caller's to report, so X is not rung for it (the flag stays down until the application reads
 * the ring empty). 1: data or the end of the stream; 0: armed.
 */
int san_conn_rx_arm_quiet(struct san_sock *s)
{
	bool was_up = s->rxr.armed;
	int r;

	if (s->err || s->peer_fin || s->anchor_dead)
		return 1;
	r = cons_arm(s);
	if (r == 0) {
		/* (with data found the wait reports it, and stands behind no flag) */
		armer_set(s, was_up, (uintptr_t)pthread_self());
		san_rxwatch_quiet_end(s); /* armed; with data it stays quiet, the caller reports it */
	}
	return r != 0;
}

/*
 * A look that found data (a receive that returned some, FIONREAD), by a reader that may never
 * meet an empty ring: when the peer has rung X SAN_CONN_BELLS_TRIM times since the last
 * drain, take those doorbells off as a sleep would (rx_arm), which then rings X once itself
 * if the ring still holds something (X stays readable, and that is a wake-up newer than this
 * look for an edge-triggered waiter) or arms if it is empty. So X's queue never fills while
 * the application reads (docs/protocol.md "A bounded doorbell queue").
 */
static void rx_trim_bells(struct san_sock *s)
{
	if (s->rxr.sh && san_shm_ring_cons_bells_since(&s->rxr) >= SAN_CONN_BELLS_TRIM)
		(void)san_conn_rx_rearm(s); /* (whoever put the flag up still stands behind it) */
}

/*
 * About to wait for ring space: plug X so that it stops being writable (the peer drains the
 * plugs when it frees space), then arm and re-check. 1: space now (unplugged again); 0: wait
 * for X to become writable.
 */
int san_conn_tx_arm(struct san_sock *s, uint32_t need)
{
	int r;

	san_conn_cork_flush(s); /* (a peer asleep over held frames would never make room) */
	plug(s);
	if (s->tx_wait_window && !need) {
		/* the buffer sizes' bound: wait until the peer has read a small frame's worth */
		uint64_t want = s->txr.prod + SAN_HDR_LEN + 64, lim = window_limit(s);

		r = s->prov->peer_read_arm(s, want > lim ? want - lim : 0);
	} else if (s->tx_wait_area && !need)
		/* a full bulk area: wait until the peer releases its oldest region's SRC_AVAIL */
		r = s->prov->area_arm(s);
	else
		r = san_shm_ring_prod_arm(&s->txr, need ? need : (uint32_t)(SAN_HDR_LEN + chunk_max(s)));
	if (r != 0) {
		san_shm_ring_prod_disarm(&s->txr);
		san_sock_unplug(s->ylocal);
		return 1;
	}
	return 0;
}

void san_conn_tx_disarm(struct san_sock *s)
{
	san_sock_lock(s);
	if (s->txr.sh) {
		s->tx_area_armed = false;
		san_shm_ring_prod_disarm(&s->txr);
		san_sock_unplug(s->ylocal);
	}
	pthread_mutex_unlock(&s->lock);
}

/*
 * close() of a connection whose sends go to the SAN: an orderly DISCONNECT after all data,
 * or an ABORT when TCP would reset (unread data, SO_LINGER {1, 0}). Lock held.
 */
void san_conn_close(struct san_sock *s)
{
	struct linger lg = { 0, 0 };
	socklen_t len = sizeof(lg);
	bool reset;
	int tries;

	san_rxwatch_quiet_end(s); /* no wait will look for it again: off the count */

	if (s->direct_out)
		san_conn_direct_drop(s);
	if (s->src_out)
		san_conn_src_drop(s);
	(void)SAN_SYS(SYS_getsockopt, (long)s->tcp, (long)SOL_SOCKET, (long)SO_LINGER, &lg, &len);
	/*
	 * Unread data: one byte of peek says so (FIONREAD's count would walk the whole ring);
	 * before the peer's MARK was read, also its bytes still on TCP before it.
	 */
	reset = (lg.l_onoff && lg.l_linger == 0) ||
		(s->rx == SK_RX_DRAIN && s->tcp_rx < s->x_peer) || san_sock_tcp_unread(s) ||
		((s->rx == SK_RX_SAN || s->rx == SK_RX_DRAIN) && s->rxr.sh && peek(s, NULL, 0, 1) > 0);
	if (reset) {
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_APP_RESET);
		return;
	}
	if (!s->fin_sent) {
		s->fin_sent = true;
		s->fin_pending = true;
	}
	/* The data before it stays in the shared ring after we go; DISCONNECT needs room too. */
	for (tries = 0; tries < 2000 && s->fin_pending; tries++) {
		struct pollfd p = { s->tcp, POLLIN, 0 };

		if (s->prov->progress)
			s->prov->progress(s); /* verbs: room in txr comes from sending, under this lock */
		san_sock_flush_fin(s);
		if (!s->fin_pending || san_sys_poll(&p, 1, 1) > 0)
			break; /* sent, or the peer is gone (or closing): nobody will read it */
	}
	/* the peer reads the ring only after our MARK: it goes now if it has not yet */
	san_sock_mark_flush(s);
}
