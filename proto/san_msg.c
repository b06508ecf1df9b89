/* proto: message encode/decode — the only place wire structs and byte order are touched. */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "proto/san_msg.h"

/* ------------------------------------------------------------------------------------------ */
/* The type table: everything decode needs to know about a type before reading its body.      */

#define SAN_CH_SIDE (1u << SAN_CHAN_SIDE)
#define SAN_CH_SESSION (1u << SAN_CHAN_SESSION)

struct san_type_desc {
	const char *name;
	uint8_t chans;	    /* SAN_CH_* where the type may travel; 0: never framed (MARK) */
	uint8_t flags;	    /* defined flag bits; the rest are reserved */
	uint16_t body;	    /* fixed body bytes (DATA: without FIRST) */
	uint32_t extra_max; /* variable bytes allowed after the body: params; DATA: see below */
};

/* DATA's payload is bounded only by the receiver's slot size, hence UINT32_MAX here. */
static const struct san_type_desc san_types[256] = {
	[SAN_T_HELLO] = { "HELLO", SAN_CH_SESSION, 0, sizeof(struct san_wire_hello), 0 },
	[SAN_T_PROPOSE] = { "PROPOSE", SAN_CH_SIDE, 0, sizeof(struct san_wire_propose),
			    SAN_PARAMS_MAX },
	[SAN_T_ACCEPT] = { "ACCEPT", SAN_CH_SIDE, 0, sizeof(struct san_wire_accept),
			   SAN_PARAMS_MAX },
	[SAN_T_REJECT] = { "REJECT", SAN_CH_SIDE, 0, sizeof(struct san_wire_reject), 0 },
	[SAN_T_SWITCH] = { "SWITCH", SAN_CH_SIDE, 0, sizeof(struct san_wire_switch), 0 },
	[SAN_T_MARK] = { "MARK", 0, 0, 0, 0 },
	[SAN_T_DATA] = { "DATA", SAN_CH_SESSION, SAN_DATA_F_FIRST | SAN_DATA_F_MODE_MASK, 0,
			 UINT32_MAX },
	[SAN_T_SRC_AVAIL] = { "SRC_AVAIL", SAN_CH_SESSION, 0, sizeof(struct san_wire_src_avail),
			      0 },
	[SAN_T_READ_DONE] = { "READ_DONE", SAN_CH_SESSION, 0, sizeof(struct san_wire_read_done),
			      0 },
	[SAN_T_WRITE_GRANT] = { "WRITE_GRANT", SAN_CH_SESSION, SAN_GRANT_F_DECLINE,
				sizeof(struct san_wire_write_grant), 0 },
	[SAN_T_WRITE_DONE] = { "WRITE_DONE", SAN_CH_SESSION, 0, sizeof(struct san_wire_write_done),
			       0 },
	[SAN_T_CREDIT_UPDATE] = { "CREDIT_UPDATE", SAN_CH_SESSION, 0, 0, 0 },
	[SAN_T_DISCONNECT] = { "DISCONNECT", SAN_CH_SESSION, 0, 0, 0 },
	[SAN_T_ABORT] = { "ABORT", SAN_CH_SIDE | SAN_CH_SESSION, 0, sizeof(struct san_wire_abort),
			  0 },
	[SAN_T_KEEPALIVE] = { "KEEPALIVE", SAN_CH_SESSION, SAN_KA_F_PROBE,
			      sizeof(struct san_wire_keepalive), 0 },
	[SAN_T_RCV_WINDOW] = { "RCV_WINDOW", SAN_CH_SESSION, 0, sizeof(struct san_wire_rcv_window),
			       0 },
};

static const struct san_type_desc *san_type_get(uint8_t type)
{
	return san_types[type].name ? &san_types[type] : NULL;
}

const char *san_type_name(uint8_t type)
{
	const struct san_type_desc *d = san_type_get(type);

	return d ? d->name : NULL;
}

bool san_type_on_chan(uint8_t type, enum san_chan chan)
{
	const struct san_type_desc *d = san_type_get(type);

	if (!d || (chan != SAN_CHAN_SIDE && chan != SAN_CHAN_SESSION))
		return false;
	return d->chans & (1u << chan);
}

uint32_t san_caps_known(uint32_t caps)
{
	return caps & SAN_CAP_KNOWN;
}

bool san_caps_hello_ok(uint32_t setup_caps, uint32_t hello_caps)
{
	return (san_caps_known(hello_caps) & ~san_caps_known(setup_caps)) == 0;
}

static const char *const san_reasons[SAN_R_MAX + 1] = {
	[SAN_R_NONE] = "none",
	[SAN_R_VERSION] = "no common version",
	[SAN_R_NOT_OWNER] = "connection not owned by the acceptor",
	[SAN_R_CREDENTIALS] = "ownership proof failed",
	[SAN_R_POLICY] = "disabled by policy",
	[SAN_R_RESOURCES] = "out of resources",
	[SAN_R_PROVIDER] = "provider unavailable",
	[SAN_R_BUSY] = "upgrade already in progress",
	[SAN_R_STATE] = "connection cannot switch now",
	[SAN_R_MALFORMED] = "malformed setup message",
	[SAN_R_TIMEOUT] = "timeout",
	[SAN_R_LOCAL] = "abandoned by proposer",
	[SAN_R_PROTOCOL] = "protocol violation",
	[SAN_R_MARK] = "switch-over mark mismatch",
	[SAN_R_CHANNEL] = "channel failed after commit",
	[SAN_R_TCP] = "TCP connection failed",
	[SAN_R_APP_RESET] = "reset by application",
	[SAN_R_KEEPALIVE] = "keepalive timeout",
};

const char *san_reason_str(uint16_t reason)
{
	return reason <= SAN_R_MAX ? san_reasons[reason] : "unknown";
}

/* ------------------------------------------------------------------------------------------ */
/* Range rules, on host structs, shared by encode (-> -EINVAL) and decode (-> -ERANGE).        */

static bool san_len_ok(uint64_t v)
{
	return v < SAN_OFFSET_MAX;
}

static bool san_ver_ok(uint8_t v)
{
	return v >= SAN_VERSION_MIN && v <= SAN_VERSION_MAX;
}

static bool san_status_ok(uint16_t s)
{
	return s == SAN_XS_OK || s == SAN_XS_FAILED;
}

/* Returns true if every field of m is inside its documented range. */
static bool san_body_in_range(const struct san_msg *m)
{
	const struct san_hello *h = &m->u.hello;
	const struct san_propose *p = &m->u.propose;
	const struct san_data *d = &m->u.data;
	const struct san_write_grant *g = &m->u.write_grant;

	switch (m->type) {
	case SAN_T_HELLO:
		/* 2 <= T and 2T + 1 <= N: see docs/protocol.md §Credits for why both matter. */
		return h->threshold >= 2 && 2u * h->threshold + 1 <= h->pool &&
		       h->max_msg >= SAN_MSG_MIN && h->max_msg <= SAN_MSG_MAX && h->nonce != 0;
	case SAN_T_PROPOSE:
		/* The range may include versions this build lacks; the header picks one it has. */
		return p->ver_min >= 1 && p->ver_min <= p->ver_max && p->ver_min <= m->version &&
		       m->version <= p->ver_max && p->provider != 0 && p->nonce != 0 &&
		       p->src.port != 0 && p->dst.port != 0 && p->params_len <= SAN_PARAMS_MAX;
	case SAN_T_ACCEPT:
		return m->u.accept.nonce != 0 && m->u.accept.params_len <= SAN_PARAMS_MAX;
	case SAN_T_REJECT:
		return m->u.reject.ver_min >= 1 && m->u.reject.ver_min <= m->u.reject.ver_max;
	case SAN_T_SWITCH:
		return san_len_ok(m->u.sw.offset);
	case SAN_T_DATA:
		if (d->payload_len == 0)
			return false;
		if (!d->first)
			return d->mode == 0 && d->total_len == 0 && d->xfer_id == 0;
		return d->mode <= SAN_XMODE_GRANT && d->total_len > d->payload_len &&
		       san_len_ok(d->total_len);
	case SAN_T_SRC_AVAIL:
		return m->u.src_avail.len != 0 && san_len_ok(m->u.src_avail.len);
	case SAN_T_READ_DONE:
		return san_status_ok(m->u.read_done.status) && san_len_ok(m->u.read_done.len);
	case SAN_T_WRITE_GRANT:
		if (!san_len_ok(g->offset))
			return false;
		if (g->decline)
			return g->addr == 0 && g->len == 0 && g->key == 0;
		return g->len != 0 && san_len_ok(g->len);
	case SAN_T_WRITE_DONE:
		return san_status_ok(m->u.write_done.status) &&
		       san_len_ok(m->u.write_done.offset) && san_len_ok(m->u.write_done.len);
	case SAN_T_CREDIT_UPDATE:
		/* An update that returns nothing would cost the peer a slot for no reason. */
		return m->credits != 0;
	case SAN_T_RCV_WINDOW:
		return san_len_ok(m->u.rcv_window.consumed);
	case SAN_T_DISCONNECT:
	case SAN_T_ABORT:
	case SAN_T_KEEPALIVE:
		return true;
	default:
		return false;
	}
}

/* Bytes after the header: body plus variable part. */
static uint32_t san_body_len(const struct san_msg *m)
{
	const struct san_type_desc *d = san_type_get(m->type);

	switch (m->type) {
	case SAN_T_PROPOSE:
		return d->body + m->u.propose.params_len;
	case SAN_T_ACCEPT:
		return d->body + m->u.accept.params_len;
	case SAN_T_DATA:
		return (m->u.data.first ? sizeof(struct san_wire_data_first) : 0) +
		       m->u.data.payload_len;
	default:
		return d->body;
	}
}

int san_msg_size(const struct san_msg *m)
{
	const struct san_type_desc *d = san_type_get(m->type);
	size_t size;

	if (!d || !d->chans)
		return -EINVAL;
	if (m->type == SAN_T_DATA && m->u.data.payload_len > SAN_MSG_MAX)
		return -EINVAL;
	/* The same limit decode enforces (protocol.md §7 rule 6): the whole message, header too. */
	size = SAN_HDR_LEN + san_body_len(m);
	if (size > SAN_MSG_MAX)
		return -EINVAL;
	return (int)size;
}

void *san_msg_payload(void *buf, const struct san_msg *m)
{
	size_t off = SAN_HDR_LEN + (m->u.data.first ? sizeof(struct san_wire_data_first) : 0);

	return (uint8_t *)buf + off;
}

/* ------------------------------------------------------------------------------------------ */
/* Encode: host -> wire. Reserved fields are written as zero by construction.                  */

static uint8_t san_flags_of(const struct san_msg *m)
{
	switch (m->type) {
	case SAN_T_DATA:
		return m->u.data.first ? SAN_DATA_F_FIRST | m->u.data.mode << SAN_DATA_F_MODE_SHIFT
				       : 0;
	case SAN_T_WRITE_GRANT:
		return m->u.write_grant.decline ? SAN_GRANT_F_DECLINE : 0;
	case SAN_T_KEEPALIVE:
		return m->u.keepalive.probe ? SAN_KA_F_PROBE : 0;
	default:
		return 0;
	}
}

static void san_put_addr(uint8_t out[16], uint16_t *port, const struct san_addr *a)
{
	memcpy(out, a->addr, 16);
	*port = htobe16(a->port);
}

/* Writes the body (and variable part) of m at p; p has room for san_body_len(m). */
static void san_encode_body(const struct san_msg *m, uint8_t *p)
{
	switch (m->type) {
	case SAN_T_HELLO: {
		struct san_wire_hello w = {
			.caps = htobe32(m->u.hello.caps),
			.pool = htobe16(m->u.hello.pool),
			.threshold = htobe16(m->u.hello.threshold),
			.max_msg = htobe32(m->u.hello.max_msg),
			.nonce = htobe64(m->u.hello.nonce),
		};
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_PROPOSE: {
		const struct san_propose *s = &m->u.propose;
		struct san_wire_propose w = {
			.ver_min = s->ver_min,
			.ver_max = s->ver_max,
			.provider = s->provider,
			.caps = htobe32(s->caps),
			.nonce = htobe64(s->nonce),
		};
		san_put_addr(w.src_addr, &w.src_port, &s->src);
		san_put_addr(w.dst_addr, &w.dst_port, &s->dst);
		memcpy(p, &w, sizeof(w));
		if (s->params_len)
			memcpy(p + sizeof(w), s->params, s->params_len);
		break;
	}
	case SAN_T_ACCEPT: {
		struct san_wire_accept w = {
			.caps = htobe32(m->u.accept.caps),
			.nonce = htobe64(m->u.accept.nonce),
		};
		memcpy(p, &w, sizeof(w));
		if (m->u.accept.params_len)
			memcpy(p + sizeof(w), m->u.accept.params, m->u.accept.params_len);
		break;
	}
	case SAN_T_REJECT: {
		struct san_wire_reject w = {
			.reason = htobe16(m->u.reject.reason),
			.ver_min = m->u.reject.ver_min,
			.ver_max = m->u.reject.ver_max,
		};
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_SWITCH: {
		struct san_wire_switch w = { .offset = htobe64(m->u.sw.offset) };
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_DATA: {
		const struct san_data *d = &m->u.data;

		if (d->first) {
			struct san_wire_data_first w = {
				.total_len = htobe64(d->total_len),
				.xfer_id = htobe32(d->xfer_id),
			};
			memcpy(p, &w, sizeof(w));
			p += sizeof(w);
		}
		if (d->payload)
			memcpy(p, d->payload, d->payload_len);
		break;
	}
	case SAN_T_SRC_AVAIL: {
		struct san_wire_src_avail w = {
			.xfer_id = htobe32(m->u.src_avail.xfer_id),
			.addr = htobe64(m->u.src_avail.addr),
			.len = htobe64(m->u.src_avail.len),
			.key = htobe64(m->u.src_avail.key),
		};
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_READ_DONE: {
		struct san_wire_read_done w = {
			.xfer_id = htobe32(m->u.read_done.xfer_id),
			.status = htobe16(m->u.read_done.status),
			.len = htobe64(m->u.read_done.len),
		};
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_WRITE_GRANT: {
		struct san_wire_write_grant w = {
			.xfer_id = htobe32(m->u.write_grant.xfer_id),
			.offset = htobe64(m->u.write_grant.offset),
			.addr = htobe64(m->u.write_grant.addr),
			.len = htobe64(m->u.write_grant.len),
			.key = htobe64(m->u.write_grant.key),
		};
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_WRITE_DONE: {
		struct san_wire_write_done w = {
			.xfer_id = htobe32(m->u.write_done.xfer_id),
			.status = htobe16(m->u.write_done.status),
			.offset = htobe64(m->u.write_done.offset),
			.len = htobe64(m->u.write_done.len),
		};
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_ABORT: {
		struct san_wire_abort w = { .reason = htobe16(m->u.abort.reason) };
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_KEEPALIVE: {
		struct san_wire_keepalive w = { .token = htobe64(m->u.keepalive.token) };
		memcpy(p, &w, sizeof(w));
		break;
	}
	case SAN_T_RCV_WINDOW: {
		struct san_wire_rcv_window w = {
			.window = htobe32(m->u.rcv_window.window),
			.consumed = htobe64(m->u.rcv_window.consumed),
		};
		memcpy(p, &w, sizeof(w));
		break;
	}
	default: /* CREDIT_UPDATE, DISCONNECT: no body */
		break;
	}
}

int san_msg_encode(const struct san_msg *m, void *buf, size_t cap)
{
	struct san_wire_hdr h;
	struct san_msg chk;
	int size = san_msg_size(m);

	if (size < 0)
		return size;
	/* Range rules are judged on what will be on the wire: version is always ours. */
	chk = *m;
	chk.version = SAN_PROTO_VERSION;
	if (!san_body_in_range(&chk))
		return -EINVAL;
	if ((size_t)size > cap)
		return -ENOSPC;

	memset(&h, 0, sizeof(h));
	h.version = SAN_PROTO_VERSION;
	h.type = m->type;
	h.flags = san_flags_of(m);
	h.credits = htobe16(m->credits);
	h.seq = htobe32(m->seq);
	h.len = htobe32((uint32_t)size - SAN_HDR_LEN);
	memcpy(buf, &h, sizeof(h));
	san_encode_body(m, (uint8_t *)buf + SAN_HDR_LEN);
	return size;
}

/* ------------------------------------------------------------------------------------------ */
/* Decode: wire -> host, rule by rule, each broken rule with its own code.                     */

static void san_get_addr(struct san_addr *a, const uint8_t in[16], uint16_t port)
{
	memcpy(a->addr, in, 16);
	a->port = be16toh(port);
}

/* Fills the body of m from p (len bytes after the header). Returns 0 or -SAN_PROTO_ERESERVED. */
static int san_decode_body(struct san_msg *m, uint8_t flags, const uint8_t *p, uint32_t len)
{
	switch (m->type) {
	case SAN_T_HELLO: {
		struct san_wire_hello w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.hello.caps = san_caps_known(be32toh(w.caps));
		m->u.hello.pool = be16toh(w.pool);
		m->u.hello.threshold = be16toh(w.threshold);
		m->u.hello.max_msg = be32toh(w.max_msg);
		m->u.hello.nonce = be64toh(w.nonce);
		break;
	}
	case SAN_T_PROPOSE: {
		struct san_propose *s = &m->u.propose;
		struct san_wire_propose w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd0 || w.rsvd1)
			return -SAN_PROTO_ERESERVED;
		s->ver_min = w.ver_min;
		s->ver_max = w.ver_max;
		s->provider = w.provider;
		s->caps = san_caps_known(be32toh(w.caps));
		s->nonce = be64toh(w.nonce);
		san_get_addr(&s->src, w.src_addr, w.src_port);
		san_get_addr(&s->dst, w.dst_addr, w.dst_port);
		s->params_len = (uint16_t)(len - sizeof(w));
		s->params = s->params_len ? p + sizeof(w) : NULL;
		break;
	}
	case SAN_T_ACCEPT: {
		struct san_wire_accept w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.accept.caps = san_caps_known(be32toh(w.caps));
		m->u.accept.nonce = be64toh(w.nonce);
		m->u.accept.params_len = (uint16_t)(len - sizeof(w));
		m->u.accept.params = m->u.accept.params_len ? p + sizeof(w) : NULL;
		break;
	}
	case SAN_T_REJECT: {
		struct san_wire_reject w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.reject.reason = be16toh(w.reason);
		m->u.reject.ver_min = w.ver_min;
		m->u.reject.ver_max = w.ver_max;
		break;
	}
	case SAN_T_SWITCH: {
		struct san_wire_switch w;

		memcpy(&w, p, sizeof(w));
		m->u.sw.offset = be64toh(w.offset);
		break;
	}
	case SAN_T_DATA: {
		struct san_data *d = &m->u.data;

		d->first = flags & SAN_DATA_F_FIRST;
		d->mode = (flags & SAN_DATA_F_MODE_MASK) >> SAN_DATA_F_MODE_SHIFT;
		if (d->first) {
			struct san_wire_data_first w;

			memcpy(&w, p, sizeof(w));
			if (w.rsvd)
				return -SAN_PROTO_ERESERVED;
			d->total_len = be64toh(w.total_len);
			d->xfer_id = be32toh(w.xfer_id);
			p += sizeof(w);
			len -= sizeof(w);
		} else if (d->mode) {
			/* The mode bits only mean something on a first chunk. */
			return -SAN_PROTO_ERESERVED;
		}
		d->payload = len ? p : NULL;
		d->payload_len = len;
		break;
	}
	case SAN_T_SRC_AVAIL: {
		struct san_wire_src_avail w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.src_avail.xfer_id = be32toh(w.xfer_id);
		m->u.src_avail.addr = be64toh(w.addr);
		m->u.src_avail.len = be64toh(w.len);
		m->u.src_avail.key = be64toh(w.key);
		break;
	}
	case SAN_T_READ_DONE: {
		struct san_wire_read_done w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.read_done.xfer_id = be32toh(w.xfer_id);
		m->u.read_done.status = be16toh(w.status);
		m->u.read_done.len = be64toh(w.len);
		break;
	}
	case SAN_T_WRITE_GRANT: {
		struct san_wire_write_grant w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.write_grant.xfer_id = be32toh(w.xfer_id);
		m->u.write_grant.decline = flags & SAN_GRANT_F_DECLINE;
		m->u.write_grant.offset = be64toh(w.offset);
		m->u.write_grant.addr = be64toh(w.addr);
		m->u.write_grant.len = be64toh(w.len);
		m->u.write_grant.key = be64toh(w.key);
		break;
	}
	case SAN_T_WRITE_DONE: {
		struct san_wire_write_done w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.write_done.xfer_id = be32toh(w.xfer_id);
		m->u.write_done.status = be16toh(w.status);
		m->u.write_done.offset = be64toh(w.offset);
		m->u.write_done.len = be64toh(w.len);
		break;
	}
	case SAN_T_ABORT: {
		struct san_wire_abort w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd0 || w.rsvd1)
			return -SAN_PROTO_ERESERVED;
		m->u.abort.reason = be16toh(w.reason);
		break;
	}
	case SAN_T_KEEPALIVE: {
		struct san_wire_keepalive w;

		memcpy(&w, p, sizeof(w));
		m->u.keepalive.probe = flags & SAN_KA_F_PROBE;
		m->u.keepalive.token = be64toh(w.token);
		break;
	}
	case SAN_T_RCV_WINDOW: {
		struct san_wire_rcv_window w;

		memcpy(&w, p, sizeof(w));
		if (w.rsvd)
			return -SAN_PROTO_ERESERVED;
		m->u.rcv_window.window = be32toh(w.window);
		m->u.rcv_window.consumed = be64toh(w.consumed);
		break;
	}
	default: /* CREDIT_UPDATE, DISCONNECT */
		break;
	}
	return 0;
}

/* Checks the body length against the type; len excludes the header. */
static int san_check_body_len(const struct san_type_desc *d, uint8_t type, uint8_t flags,
			      uint32_t len)
{
	uint32_t body = d->body;

	if (type == SAN_T_DATA && (flags & SAN_DATA_F_FIRST))
		body = sizeof(struct san_wire_data_first);
	if (len < body)
		return -SAN_PROTO_ELENGTH;
	if (len - body > d->extra_max)
		return d->extra_max ? -SAN_PROTO_EOVERSIZE : -SAN_PROTO_ELENGTH;
	return 0;
}

int san_msg_peek_len(const void *buf, size_t buflen, uint32_t max_len, uint32_t *need)
{
	const uint8_t *b = buf;
	struct san_wire_hdr h;
	uint64_t total;

	/* Byte 0 is the version in every version, so judge it before trusting any layout. */
	if (buflen >= 1 && !san_ver_ok(b[0]))
		return -SAN_PROTO_EVERSION;
	if (buflen < SAN_HDR_LEN)
		return -SAN_PROTO_ETRUNC;
	memcpy(&h, b, sizeof(h));
	total = (uint64_t)SAN_HDR_LEN + be32toh(h.len);
	if (total > max_len || total > SAN_MSG_MAX)
		return -SAN_PROTO_EOVERSIZE;
	*need = (uint32_t)total;
	return 0;
}

int san_msg_decode(const void *buf, size_t buflen, enum san_chan chan, uint32_t max_len,
		   struct san_msg *m)
{
	const uint8_t *b = buf;
	const struct san_type_desc *d;
	struct san_wire_hdr h;
	uint32_t len;
	int err;

	if (buflen < 1)
		return -SAN_PROTO_ETRUNC;
	if (!san_ver_ok(b[0]))
		return -SAN_PROTO_EVERSION;
	if (buflen < SAN_HDR_LEN)
		return -SAN_PROTO_ETRUNC;
	memcpy(&h, b, sizeof(h));

	d = san_type_get(h.type);
	if (!d)
		return -SAN_PROTO_ETYPE;
	if (!san_type_on_chan(h.type, chan))
		return -SAN_PROTO_ECHANNEL;
	if (h.rsvd0 || h.rsvd1 || (h.flags & ~d->flags))
		return -SAN_PROTO_ERESERVED;
	/* Credits belong to the SAN channel's buffer pool; the side channel has none. */
	if (chan == SAN_CHAN_SIDE && h.credits)
		return -SAN_PROTO_ERESERVED;

	len = be32toh(h.len);
	if ((uint64_t)SAN_HDR_LEN + len > max_len || (uint64_t)SAN_HDR_LEN + len > SAN_MSG_MAX)
		return -SAN_PROTO_EOVERSIZE;
	if (buflen < (uint64_t)SAN_HDR_LEN + len)
		return -SAN_PROTO_ETRUNC;
	err = san_check_body_len(d, h.type, h.flags, len);
	if (err)
		return err;

	memset(m, 0, sizeof(*m));
	m->version = h.version;
	m->type = h.type;
	m->credits = be16toh(h.credits);
	m->seq = be32toh(h.seq);
	m->wire_len = SAN_HDR_LEN + len;
	err = san_decode_body(m, h.flags, b + SAN_HDR_LEN, len);
	if (err)
		return err;
	if (!san_body_in_range(m))
		return -SAN_PROTO_ERANGE;
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Sequence numbers and the MARK.                                                             */

bool san_seq_before(uint32_t a, uint32_t b)
{
	/* Serial-number arithmetic: correct while the two are less than 2^31 apart. */
	return (int32_t)(a - b) < 0;
}

int san_msg_check_seq(const struct san_msg *m, uint32_t expected)
{
	return m->seq == expected ? 0 : -SAN_PROTO_ESEQ;
}

void san_mark_encode(void *buf, uint8_t version, uint64_t nonce)
{
	struct san_wire_mark w = {
		.version = version,
		.type = SAN_T_MARK,
		.magic = htobe32(SAN_MARK_MAGIC),
		.nonce = htobe64(nonce),
	};

	memcpy(buf, &w, sizeof(w));
}

int san_mark_check(const void *buf, uint8_t version, uint64_t expected_nonce)
{
	struct san_wire_mark w;

	memcpy(&w, buf, sizeof(w));
	/*
	 * Everything but the nonce is constant, so any difference there means these 16 bytes
	 * are not a MARK at all (EMAGIC); a well-formed MARK with another nonce was written by
	 * someone who does not own this connection's other end (ENONCE). Both reset.
	 */
	if (w.version != version || w.type != SAN_T_MARK || w.rsvd ||
	    be32toh(w.magic) != SAN_MARK_MAGIC)
		return -SAN_PROTO_EMAGIC;
	if (be64toh(w.nonce) != expected_nonce)
		return -SAN_PROTO_ENONCE;
	return 0;
}
