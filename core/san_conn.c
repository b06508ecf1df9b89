/* core — the switched data path over the shm rings: DATA in, DATA out, doorbells, close. */
#include <string.h>

#include "core/san_log.h"
#include "core/san_sock.h"
#include "core/san_stats.h"
#include "core/san_sys.h"
#include "proto/san_msg.h"
#include "proto/san_upgrade.h"

/*
 * Largest DATA payload per frame. Bigger frames mean fewer seals per byte; the ring must hold
 * at least two of them (a frame may be at most half the data area).
 */
#define SAN_CONN_CHUNK (64u * 1024u)

/* Copy n bytes between buf and the iovec array from its byte off: into iov if to_iov. */
static void iov_copy(const struct iovec *iov, int cnt, size_t off, void *buf, size_t n,
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

/* The peer waits for ring space: take out the plugs it put on its X (docs/engine.md §5). */
static void unplug(int yfd)
{
	char b[4096];

	for (int i = 0; i < 16; i++)
		if (san_sys_recv(yfd, b, sizeof(b), MSG_DONTWAIT) < 0)
			break;
}

static void ring_broken(struct san_sock *s, const char *what, int r)
{
	san_warn("fd %d: %s: %s%s%s", s->fd, what, r == -EPROTO ? "broken ring" : san_proto_strerror(r),
		 s->rxr.why ? ": " : "", s->rxr.why ? s->rxr.why : "");
	san_sock_reset_locked(s, -ECONNRESET, r == -EPROTO ? SAN_R_PROTOCOL : SAN_R_PROTOCOL);
}

/* Publish the reserved frame and ring the peer if it sleeps. */
static int commit(struct san_sock *s)
{
	int c = san_shm_ring_prod_commit(&s->txr);

	if (c == 1)
		san_sock_ring_peer(s);
	if (c < 0) {
		ring_broken(s, "send", c);
		return -ECONNRESET;
	}
	return 0;
}

int san_conn_post_ctrl(struct san_sock *s, uint8_t type, uint16_t reason)
{
	struct san_msg m = { .type = type };
	void *buf;
	int room;

	if (type == SAN_T_ABORT)
		m.u.abort.reason = reason;
	room = san_shm_ring_prod_reserve(&s->txr, (uint32_t)san_msg_size(&m), &buf);
	if (room < 0)
		return room;
	if (san_msg_encode(&m, buf, (size_t)room) < 0)
		return -EINVAL;
	return commit(s);
}

int san_conn_send_hello(struct san_sock *s)
{
	struct san_msg m = { .type = SAN_T_HELLO };
	void *buf;
	int room;

	/*
	 * shm: the ring's byte space is the flow control (docs/protocol.md, shm provider); the
	 * geometry is the largest valid one, so credits never bind.
	 */
	m.u.hello.caps = 0;
	m.u.hello.pool = 65535;
	m.u.hello.threshold = 32767;
	m.u.hello.max_msg = s->rxr.max_msg;
	m.u.hello.nonce = s->nonce_peer;
	room = san_shm_ring_prod_reserve(&s->txr, (uint32_t)san_msg_size(&m), &buf);
	if (room < 0)
		return room;
	if (san_msg_encode(&m, buf, (size_t)room) < 0)
		return -EINVAL;
	return commit(s);
}

ssize_t san_conn_send(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t total)
{
	size_t sent = 0;

	if (s->fin_sent || s->anchor_dead)
		return -EPIPE;
	while (sent < total) {
		size_t chunk = total - sent;
		struct san_msg m = { .type = SAN_T_DATA };
		void *buf;
		int room, r;

		if (chunk > SAN_CONN_CHUNK)
			chunk = SAN_CONN_CHUNK;
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
		iov_copy(iov, iovcnt, sent, san_msg_payload(buf, &m), chunk, false);
		r = commit(s);
		if (r < 0)
			return sent ? (ssize_t)sent : r;
		sent += chunk;
	}
	if (!sent)
		return -EAGAIN;
	if (san_stats_enabled())
		san_stats_add(SAN_STAT_SAN_TX_BYTES, sent);
	return (ssize_t)sent;
}

/* Done with the frame at the read cursor: release it, and let a waiting producer go on. */
static int consume(struct san_sock *s)
{
	int c = san_shm_ring_cons_consume(&s->rxr);

	if (c == 1 && s->ypeer >= 0)
		unplug(s->ypeer);
	if (c < 0) {
		ring_broken(s, "receive", c);
		return -ECONNRESET;
	}
	return 0;
}

/*
 * Deliver what the ring holds, in order: DATA payloads into iov (MSG_PEEK: the current frame
 * only, nothing consumed), session messages handled on the way. Returns bytes, 0 at the
 * peer's DISCONNECT, -EAGAIN when empty, -ECONNRESET.
 */
ssize_t san_conn_recv(struct san_sock *s, const struct iovec *iov, int iovcnt, int flags)
{
	size_t space = 0, got = 0;

	for (int i = 0; i < iovcnt; i++)
		space += iov[i].iov_len;
	while (!s->err && !s->peer_fin && (got < space || !space)) {
		struct san_shm_frame f;
		struct san_msg m;
		int r = san_shm_ring_cons_peek(&s->rxr, &f);

		if (r == -EAGAIN)
			break;
		if (r < 0) {
			ring_broken(s, "receive", r);
			break;
		}
		r = san_msg_decode(f.msg, f.len, SAN_CHAN_SESSION, s->rxr.max_msg, &m);
		if (r < 0) {
			ring_broken(s, "receive", r);
			break;
		}
		switch (m.type) {
		case SAN_T_HELLO:
			if (s->hello_rx || m.u.hello.nonce != s->nonce_mine) {
				ring_broken(s, "HELLO", -SAN_PROTO_ENONCE);
				continue;
			}
			s->hello_rx = true;
			(void)consume(s);
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

			if (!s->hello_rx || m.u.data.first) {
				/* v1 of the engine sends plain DATA only; FIRST needs bulk support */
				ring_broken(s, "DATA", -SAN_PROTO_ERANGE);
				continue;
			}
			if (!space)
				return 1; /* a zero-length read only asks whether data is there */
			if (n > space - got)
				n = space - got;
			iov_copy(iov, iovcnt, got, (void *)(pl + s->rx_off), n, true);
			got += n;
			if (flags & MSG_PEEK)
				goto out;
			s->rx_off += (uint32_t)n;
			if (s->rx_off == m.u.data.payload_len) {
				s->rx_off = 0;
				(void)consume(s);
			}
			continue;
		}
		case SAN_T_DISCONNECT:
			if (got)
				goto out; /* the data first; EOF on the next call */
			s->peer_fin = true;
			(void)consume(s);
			break;
		case SAN_T_ABORT:
			san_info("fd %d: peer reset the connection (%s)", s->fd,
				 san_reason_str(m.u.abort.reason));
			(void)consume(s);
			s->err = -ECONNRESET;
			if (s->tcp >= 0)
				(void)san_sys_shutdown(s->tcp, SHUT_RDWR);
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
		if (san_stats_enabled() && !(flags & MSG_PEEK))
			san_stats_add(SAN_STAT_SAN_RX_BYTES, got);
		return (ssize_t)got;
	}
	if (s->peer_fin)
		return 0;
	if (s->err)
		return s->err;
	if (s->anchor_dead) {
		/* The anchor ended and no DISCONNECT came: the peer died. */
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
		return -ECONNRESET;
	}
	return -EAGAIN;
}

bool san_conn_rx_ready(struct san_sock *s)
{
	struct san_shm_frame f;

	if (s->err || s->peer_fin || s->anchor_dead || !s->rxr.sh)
		return true;
	return san_shm_ring_cons_peek(&s->rxr, &f) != -EAGAIN;
}

/* FIONREAD: the bytes left in the frame at the read cursor (a lower bound of what waits). */
size_t san_conn_rx_bytes(struct san_sock *s)
{
	struct san_shm_frame f;
	struct san_msg m;

	if (san_shm_ring_cons_peek(&s->rxr, &f) < 0 ||
	    san_msg_decode(f.msg, f.len, SAN_CHAN_SESSION, s->rxr.max_msg, &m) < 0 ||
	    m.type != SAN_T_DATA)
		return 0;
	return m.u.data.payload_len > s->rx_off ? m.u.data.payload_len - s->rx_off : 0;
}

/*
 * About to sleep until data comes: take the doorbells off X (only now that the ring is
 * empty, so X never reads as empty while frames wait), arm, re-check. 1: something came
 * (do not sleep); 0: armed.
 */
int san_conn_rx_arm(struct san_sock *s)
{
	char b[64];
	int r;

	for (int i = 0; i < 1024; i++)
		if (san_sys_recv(s->xfd, b, sizeof(b), MSG_DONTWAIT) < 0)
			break;
	r = san_shm_ring_cons_arm(&s->rxr);
	if (r == 1) {
		/* We took the doorbells: the data found must keep X readable if left unread. */
		san_sock_ring_self(s);
		return 1;
	}
	return r < 0 ? 1 : 0;
}

/*
 * About to wait for ring space: plug X so that it stops being writable (the peer drains the
 * plugs when it frees space), then arm and re-check. 1: space now (unplugged again); 0: wait
 * for X to become writable.
 */
int san_conn_tx_arm(struct san_sock *s, uint32_t need)
{
	static const char plug[2048];
	int r;

	for (int i = 0; i < 4; i++)
		if (san_sys_send(s->xfd, plug, sizeof(plug), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			break;
	r = san_shm_ring_prod_arm(&s->txr, need ? need : SAN_HDR_LEN + SAN_CONN_CHUNK);
	if (r != 0) {
		san_shm_ring_prod_disarm(&s->txr);
		unplug(s->ylocal);
		return 1;
	}
	return 0;
}

void san_conn_tx_disarm(struct san_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->txr.sh) {
		san_shm_ring_prod_disarm(&s->txr);
		unplug(s->ylocal);
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

	(void)SAN_SYS(SYS_getsockopt, (long)s->tcp, (long)SOL_SOCKET, (long)SO_LINGER, &lg, &len);
	reset = (lg.l_onoff && lg.l_linger == 0) || (s->rx == SK_RX_SAN && s->rxr.sh &&
						     san_conn_rx_bytes(s) > 0);
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

		san_sock_flush_fin(s);
		if (!s->fin_pending || san_sys_poll(&p, 1, 1) > 0)
			break; /* sent, or the peer is gone (or closing): nobody will read it */
	}
}
