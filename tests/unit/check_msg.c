/* tests/unit: message encode/decode — round trips of every type, every rejection path. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/san_credit.h"
#include "proto/san_frame.h"
#include "proto/san_msg.h"
#include "tests/unit/suites.h"

#define BUF 512
#define SLOT 4096 /* receive slot size used as max_len */

static const uint8_t params8[8] = { 'v', 'e', 'r', 'b', 's', 0, 1, 2 };
static const uint8_t params4[4] = { 's', 'h', 'm', 0 };
static const char hello5[] = "hello";
/* clang-format off */
static const uint8_t chunk32[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
				     17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31 };
/* clang-format on */

struct msg_case {
	const char *what;
	enum san_chan chan;
	struct san_msg m;
};

/* At least one valid message of every type, and every flag and variable-part variant. */
/* clang-format off */
static const struct msg_case msgs[] = {
	{ "HELLO", SAN_CHAN_SESSION,
	  { .type = SAN_T_HELLO,
	    .seq = 0,
	    .u.hello = { SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE, 64, 16, 4096, 0x1111222233334444 } } },
	{ "PROPOSE+params", SAN_CHAN_SIDE,
	  { .type = SAN_T_PROPOSE,
	    .u.propose = { .ver_min = 1,
			   .ver_max = 1,
			   .provider = SAN_PROV_VERBS,
			   .caps = SAN_CAP_RDMA_READ,
			   .nonce = 0xa5a5a5a5a5a5a5a5,
			   .src = { { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 }, 40000 },
			   .dst = { { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2 }, 5201 },
			   .params = params8,
			   .params_len = sizeof(params8) } } },
	{ "PROPOSE", SAN_CHAN_SIDE,
	  { .type = SAN_T_PROPOSE,
	    .seq = 7,
	    .u.propose = { .ver_min = 1,
			   .ver_max = 3,
			   .provider = SAN_PROV_SHM,
			   .nonce = 1,
			   .src = { { 0xfe, 0x80, [15] = 1 }, 1 },
			   .dst = { { 0xfe, 0x80, [15] = 2 }, 65535 } } } },
	{ "ACCEPT+params", SAN_CHAN_SIDE,
	  { .type = SAN_T_ACCEPT,
	    .seq = 1,
	    .u.accept = { SAN_CAP_RDMA_WRITE, 0x5a5a5a5a5a5a5a5a, params4, sizeof(params4) } } },
	{ "ACCEPT", SAN_CHAN_SIDE, { .type = SAN_T_ACCEPT, .u.accept = { 0, 42, NULL, 0 } } },
	{ "REJECT", SAN_CHAN_SIDE,
	  { .type = SAN_T_REJECT, .u.reject = { SAN_R_VERSION, 1, 1 } } },
	{ "REJECT unknown reason", SAN_CHAN_SIDE,
	  { .type = SAN_T_REJECT, .u.reject = { 0xfffe, 1, 4 } } },
	{ "SWITCH", SAN_CHAN_SIDE, { .type = SAN_T_SWITCH, .seq = 2, .u.sw = { 123456789 } } },
	{ "SWITCH at 0", SAN_CHAN_SIDE, { .type = SAN_T_SWITCH, .u.sw = { 0 } } },
	{ "DATA", SAN_CHAN_SESSION,
	  { .type = SAN_T_DATA,
	    .credits = 3,
	    .seq = 0xffffffff,
	    .u.data = { .payload = hello5, .payload_len = 5 } } },
	{ "DATA first copy", SAN_CHAN_SESSION,
	  { .type = SAN_T_DATA,
	    .seq = 9,
	    .u.data = { true, SAN_XMODE_COPY, 33, 1, chunk32, sizeof(chunk32) } } },
	{ "DATA first read", SAN_CHAN_SESSION,
	  { .type = SAN_T_DATA,
	    .u.data = { true, SAN_XMODE_READ, 1ull << 40, 0xfffffffe, chunk32, sizeof(chunk32) } } },
	{ "DATA first grant", SAN_CHAN_SESSION,
	  { .type = SAN_T_DATA, .u.data = { true, SAN_XMODE_GRANT, 100000, 2, chunk32, 1 } } },
	{ "SRC_AVAIL", SAN_CHAN_SESSION,
	  { .type = SAN_T_SRC_AVAIL,
	    .credits = 65535,
	    .u.src_avail = { 9, 0x7f0000001000, 99968, 0xdeadbeefcafef00d } } },
	{ "READ_DONE", SAN_CHAN_SESSION,
	  { .type = SAN_T_READ_DONE, .u.read_done = { 9, SAN_XS_OK, 99968 } } },
	{ "READ_DONE failed", SAN_CHAN_SESSION,
	  { .type = SAN_T_READ_DONE, .u.read_done = { 9, SAN_XS_FAILED, 0 } } },
	{ "WRITE_GRANT", SAN_CHAN_SESSION,
	  { .type = SAN_T_WRITE_GRANT,
	    .u.write_grant = { 4, false, 65536, 0x7f0000002000, 65536, 77 } } },
	{ "WRITE_GRANT decline", SAN_CHAN_SESSION,
	  { .type = SAN_T_WRITE_GRANT, .u.write_grant = { 4, true, 0, 0, 0, 0 } } },
	{ "WRITE_DONE", SAN_CHAN_SESSION,
	  { .type = SAN_T_WRITE_DONE, .u.write_done = { 4, SAN_XS_OK, 65536, 65536 } } },
	{ "WRITE_DONE failed", SAN_CHAN_SESSION,
	  { .type = SAN_T_WRITE_DONE, .u.write_done = { 4, SAN_XS_FAILED, 0, 100 } } },
	{ "CREDIT_UPDATE", SAN_CHAN_SESSION, { .type = SAN_T_CREDIT_UPDATE, .credits = 17 } },
	{ "DISCONNECT", SAN_CHAN_SESSION, { .type = SAN_T_DISCONNECT, .credits = 1, .seq = 88 } },
	{ "ABORT side", SAN_CHAN_SIDE, { .type = SAN_T_ABORT, .u.abort = { SAN_R_TIMEOUT } } },
	{ "ABORT session", SAN_CHAN_SESSION,
	  { .type = SAN_T_ABORT, .credits = 2, .u.abort = { SAN_R_APP_RESET } } },
	{ "KEEPALIVE probe", SAN_CHAN_SESSION,
	  { .type = SAN_T_KEEPALIVE, .u.keepalive = { true, 0x0123456789abcdef } } },
	{ "KEEPALIVE reply", SAN_CHAN_SESSION,
	  { .type = SAN_T_KEEPALIVE, .u.keepalive = { false, 0x0123456789abcdef } } },
	{ "RCV_WINDOW", SAN_CHAN_SESSION,
	  { .type = SAN_T_RCV_WINDOW, .u.rcv_window = { 8192, 0x0000000123456788ull } } },
	{ "RCV_WINDOW unbounded", SAN_CHAN_SESSION,
	  { .type = SAN_T_RCV_WINDOW, .u.rcv_window = { 0, 0 } } },
};
/* clang-format on */
#define NMSGS (int)(sizeof(msgs) / sizeof(msgs[0]))

static int blob_eq(const void *a, size_t alen, const void *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* Field-by-field equality; variable parts compared by content, not by pointer. */
static int msg_eq(const struct san_msg *a, const struct san_msg *b)
{
	if (a->type != b->type || a->credits != b->credits || a->seq != b->seq)
		return 0;
	switch (a->type) {
	case SAN_T_HELLO:
		return !memcmp(&a->u.hello, &b->u.hello, sizeof(a->u.hello));
	case SAN_T_PROPOSE: {
		const struct san_propose *x = &a->u.propose, *y = &b->u.propose;

		return x->ver_min == y->ver_min && x->ver_max == y->ver_max &&
		       x->provider == y->provider && x->caps == y->caps && x->nonce == y->nonce &&
		       !memcmp(x->src.addr, y->src.addr, 16) && x->src.port == y->src.port &&
		       !memcmp(x->dst.addr, y->dst.addr, 16) && x->dst.port == y->dst.port &&
		       blob_eq(x->params, x->params_len, y->params, y->params_len);
	}
	case SAN_T_ACCEPT:
		return a->u.accept.caps == b->u.accept.caps &&
		       a->u.accept.nonce == b->u.accept.nonce &&
		       blob_eq(a->u.accept.params, a->u.accept.params_len, b->u.accept.params,
			       b->u.accept.params_len);
	case SAN_T_REJECT:
		return !memcmp(&a->u.reject, &b->u.reject, sizeof(a->u.reject));
	case SAN_T_SWITCH:
		return a->u.sw.offset == b->u.sw.offset;
	case SAN_T_DATA: {
		const struct san_data *x = &a->u.data, *y = &b->u.data;

		return x->first == y->first && x->mode == y->mode && x->total_len == y->total_len &&
		       x->xfer_id == y->xfer_id &&
		       blob_eq(x->payload, x->payload_len, y->payload, y->payload_len);
	}
	case SAN_T_SRC_AVAIL:
		return !memcmp(&a->u.src_avail, &b->u.src_avail, sizeof(a->u.src_avail));
	case SAN_T_READ_DONE:
		return a->u.read_done.xfer_id == b->u.read_done.xfer_id &&
		       a->u.read_done.status == b->u.read_done.status &&
		       a->u.read_done.len == b->u.read_done.len;
	case SAN_T_WRITE_GRANT:
		return a->u.write_grant.xfer_id == b->u.write_grant.xfer_id &&
		       a->u.write_grant.decline == b->u.write_grant.decline &&
		       a->u.write_grant.offset == b->u.write_grant.offset &&
		       a->u.write_grant.addr == b->u.write_grant.addr &&
		       a->u.write_grant.len == b->u.write_grant.len &&
		       a->u.write_grant.key == b->u.write_grant.key;
	case SAN_T_WRITE_DONE:
		return a->u.write_done.xfer_id == b->u.write_done.xfer_id &&
		       a->u.write_done.status == b->u.write_done.status &&
		       a->u.write_done.offset == b->u.write_done.offset &&
		       a->u.write_done.len == b->u.write_done.len;
	case SAN_T_ABORT:
		return a->u.abort.reason == b->u.abort.reason;
	case SAN_T_KEEPALIVE:
		return a->u.keepalive.probe == b->u.keepalive.probe &&
		       a->u.keepalive.token == b->u.keepalive.token;
	case SAN_T_RCV_WINDOW:
		return a->u.rcv_window.window == b->u.rcv_window.window &&
		       a->u.rcv_window.consumed == b->u.rcv_window.consumed;
	default:
		return 1;
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Round trips.                                                                               */

START_TEST(test_round_trip)
{
	const struct msg_case *c = &msgs[_i];
	uint8_t buf[BUF], again[BUF];
	struct san_msg out;
	int n, n2, size;

	size = san_msg_size(&c->m);
	ck_assert_int_gt(size, 0);
	n = san_msg_encode(&c->m, buf, sizeof(buf));
	ck_assert_msg(n == size, "%s: encode returned %d, size %d", c->what, n, size);
	ck_assert_int_eq(buf[0], SAN_PROTO_VERSION);
	ck_assert_int_eq(buf[1], c->m.type);

	n2 = san_msg_decode(buf, n, c->chan, SLOT, &out);
	ck_assert_msg(n2 == 0, "%s: decode: %s", c->what, san_proto_strerror(n2));
	ck_assert_uint_eq(out.wire_len, n);
	ck_assert_uint_eq(out.version, SAN_PROTO_VERSION);
	ck_assert_msg(msg_eq(&c->m, &out), "%s: decoded message differs", c->what);

	/* Decoding is exact: re-encoding the decoded message gives the same bytes. */
	n2 = san_msg_encode(&out, again, sizeof(again));
	ck_assert_int_eq(n2, n);
	ck_assert_mem_eq(buf, again, n);

	/* Trailing bytes (the next message on a stream) are left alone. */
	memset(buf + n, 0xee, 8);
	ck_assert_int_eq(san_msg_decode(buf, n + 8, c->chan, SLOT, &out), 0);
	ck_assert_uint_eq(out.wire_len, n);
}
END_TEST

/* Every proper prefix of every message is truncated (or, empty, too short to tell). */
START_TEST(test_every_prefix_truncated)
{
	const struct msg_case *c = &msgs[_i];
	uint8_t buf[BUF];
	struct san_msg out;
	uint32_t need;
	int n = san_msg_encode(&c->m, buf, sizeof(buf));

	ck_assert_int_gt(n, 0);
	for (int len = 0; len < n; len++) {
		ck_assert_int_eq(san_msg_decode(buf, len, c->chan, SLOT, &out), -SAN_PROTO_ETRUNC);
		if (len < SAN_HDR_LEN)
			ck_assert_int_eq(san_msg_peek_len(buf, len, SLOT, &need),
					 -SAN_PROTO_ETRUNC);
	}
	ck_assert_int_eq(san_msg_peek_len(buf, SAN_HDR_LEN, SLOT, &need), 0);
	ck_assert_uint_eq(need, n);
}
END_TEST

/* Every type belongs to its channel(s) only. */
START_TEST(test_wrong_channel)
{
	const struct msg_case *c = &msgs[_i];
	enum san_chan other = c->chan == SAN_CHAN_SIDE ? SAN_CHAN_SESSION : SAN_CHAN_SIDE;
	uint8_t buf[BUF];
	struct san_msg out;
	int n = san_msg_encode(&c->m, buf, sizeof(buf));
	int err = san_msg_decode(buf, n, other, SLOT, &out);

	if (c->m.type == SAN_T_ABORT)
		/* ABORT travels on both; on the side channel it must not carry credits. */
		ck_assert_int_eq(err, c->m.credits ? -SAN_PROTO_ERESERVED : 0);
	else
		ck_assert_int_eq(err, -SAN_PROTO_ECHANNEL);
}
END_TEST

START_TEST(test_encode_refuses)
{
	struct san_msg m = { .type = SAN_T_DATA,
			     .u.data = { .payload = hello5, .payload_len = 5 } };
	uint8_t buf[BUF];

	ck_assert_int_eq(san_msg_encode(&m, buf, 20), -ENOSPC);
	ck_assert_int_eq(san_msg_encode(&m, buf, 21), 21);
	m.u.data.payload_len = 0;
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m = (struct san_msg){ .type = SAN_T_MARK };
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m = (struct san_msg){ .type = 0x42 };
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m = (struct san_msg){ .type = SAN_T_CREDIT_UPDATE, .credits = 0 };
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m = msgs[0].m;
	m.u.hello.threshold = 40; /* 2T + 1 > pool 64 */
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m = msgs[1].m;
	m.u.propose.params_len = SAN_PARAMS_MAX + 1;
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), -EINVAL);

	/* Encode and decode share one size limit: header included, at most SAN_MSG_MAX. */
	m = (struct san_msg){ .type = SAN_T_DATA,
			      .u.data = { .payload_len = SAN_MSG_MAX - SAN_HDR_LEN } };
	ck_assert_int_eq(san_msg_size(&m), SAN_MSG_MAX);
	m.u.data.payload_len++;
	ck_assert_int_eq(san_msg_size(&m), -EINVAL);
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
}
END_TEST

/* A DATA payload can be reserved at encode and filled in place (the zero-extra-copy path). */
START_TEST(test_payload_in_place)
{
	struct san_msg m = { .type = SAN_T_DATA,
			     .u.data = { true, SAN_XMODE_COPY, 1000, 5, NULL, 16 } };
	struct san_msg out;
	uint8_t buf[BUF];
	int n = san_msg_encode(&m, buf, sizeof(buf));

	ck_assert_int_eq(n, 16 + 16 + 16);
	memcpy(san_msg_payload(buf, &m), "0123456789abcdef", 16);
	ck_assert_int_eq(san_msg_decode(buf, n, SAN_CHAN_SESSION, SLOT, &out), 0);
	ck_assert_mem_eq(out.u.data.payload, "0123456789abcdef", 16);
	ck_assert_ptr_eq(out.u.data.payload, buf + 32);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Rejections: start from a valid message, break one rule, expect that rule's code.            */

struct patch {
	int16_t off; /* byte offset in the encoded message; -1 ends the list */
	uint8_t val;
};

struct reject_case {
	const char *what;
	int base;	   /* index into msgs[] */
	struct patch p[6]; /* applied in order, up to an END */
	int buflen;	   /* bytes given to decode; 0: the encoded length */
	uint32_t max_len;  /* 0: SLOT */
	int expect;	   /* -SAN_PROTO_E* */
	int chan;	   /* 0: the base message's channel */
	struct {
		int16_t off; /* then zero len bytes from off (fields wider than the patches) */
		uint8_t len;
	} zero;
};

/* clang-format off */
#define END { -1, 0 }
#define HDR_LEN_IS(n) { 12, 0 }, { 13, 0 }, { 14, (uint8_t)((n) >> 8) }, { 15, (uint8_t)(n) }
/* clang-format on */

enum {
	M_HELLO = 0,
	M_PROPOSE = 1,
	M_ACCEPT = 3,
	M_REJECT = 5,
	M_SWITCH = 7,
	M_DATA = 9,
	M_DATA_FIRST = 10,
	M_SRC = 13,
	M_RDONE = 14,
	M_GRANT = 16,
	M_DECLINE = 17,
	M_WDONE = 18,
	M_CREDIT = 20,
	M_DISC = 21,
	M_ABORT = 22,
	M_ABORT_S = 23,
	M_KA = 24
};

/* clang-format off */
static const struct reject_case rejects[] = {
	/* version: judged first, from byte 0 alone */
	{ "version 0", M_SWITCH, { { 0, 0 }, END }, 0, 0, -SAN_PROTO_EVERSION, 0, { 0, 0 } },
	{ "version 2", M_DATA, { { 0, 2 }, END }, 0, 0, -SAN_PROTO_EVERSION, 0, { 0, 0 } },
	{ "version 255, 1 byte", M_DATA, { { 0, 255 }, END }, 1, 0, -SAN_PROTO_EVERSION, 0, { 0, 0 } },
	/* truncation */
	{ "empty", M_DATA, { END }, -1, 0, -SAN_PROTO_ETRUNC, 0, { 0, 0 } },
	{ "half header", M_DATA, { END }, 8, 0, -SAN_PROTO_ETRUNC, 0, { 0, 0 } },
	{ "len beyond buffer", M_SWITCH, { HDR_LEN_IS(9), END }, 24, 0, -SAN_PROTO_ETRUNC, 0, { 0, 0 } },
	/* type */
	{ "type 0", M_DATA, { { 1, 0x00 }, END }, 0, 0, -SAN_PROTO_ETYPE, 0, { 0, 0 } },
	{ "type 0x07", M_DATA, { { 1, 0x07 }, END }, 0, 0, -SAN_PROTO_ETYPE, 0, { 0, 0 } },
	{ "type 0x1a", M_DATA, { { 1, 0x1a }, END }, 0, 0, -SAN_PROTO_ETYPE, 0, { 0, 0 } },
	{ "type 0xff", M_DATA, { { 1, 0xff }, END }, 0, 0, -SAN_PROTO_ETYPE, 0, { 0, 0 } },
	/* channel */
	{ "MARK framed", M_DATA, { { 1, SAN_T_MARK }, END }, 0, 0, -SAN_PROTO_ECHANNEL, 0, { 0, 0 } },
	{ "SWITCH on SAN", M_SWITCH, { END }, 0, 0, -SAN_PROTO_ECHANNEL, SAN_CHAN_SESSION, { 0, 0 } },
	{ "HELLO on side", M_HELLO, { END }, 0, 0, -SAN_PROTO_ECHANNEL, SAN_CHAN_SIDE, { 0, 0 } },
	/* header reserved fields and undefined flags */
	{ "rsvd0", M_DATA, { { 3, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "rsvd1 hi", M_DATA, { { 6, 0x80 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "rsvd1 lo", M_DATA, { { 7, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "flag on SWITCH", M_SWITCH, { { 2, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "DATA flag 0x08", M_DATA, { { 2, 0x08 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "GRANT flag 0x80", M_GRANT, { { 2, 0x80 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "KEEPALIVE flag 2", M_KA, { { 2, 0x03 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "credits on side", M_ACCEPT, { { 5, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	/* oversize */
	{ "above slot", M_DATA, { END }, 0, 20, -SAN_PROTO_EOVERSIZE, 0, { 0, 0 } },
	{ "above SAN_MSG_MAX", M_DATA, { { 12, 0x7f }, END }, 0, UINT32_MAX,
	  -SAN_PROTO_EOVERSIZE, 0, { 0, 0 } },
	{ "params too long", M_PROPOSE, { HDR_LEN_IS(56 + SAN_PARAMS_MAX + 1), END },
	  16 + 56 + SAN_PARAMS_MAX + 1, 0, -SAN_PROTO_EOVERSIZE, 0, { 0, 0 } },
	/* body length */
	{ "SWITCH len 7", M_SWITCH, { HDR_LEN_IS(7), END }, 0, 0, -SAN_PROTO_ELENGTH, 0, { 0, 0 } },
	{ "SWITCH len 9", M_SWITCH, { HDR_LEN_IS(9), END }, 25, 0, -SAN_PROTO_ELENGTH, 0, { 0, 0 } },
	{ "HELLO len 23", M_HELLO, { HDR_LEN_IS(23), END }, 0, 0, -SAN_PROTO_ELENGTH, 0, { 0, 0 } },
	{ "PROPOSE short", M_PROPOSE, { HDR_LEN_IS(55), END }, 0, 0, -SAN_PROTO_ELENGTH, 0, { 0, 0 } },
	{ "DATA first short", M_DATA, { { 2, SAN_DATA_F_FIRST }, END }, 0, 0,
	  -SAN_PROTO_ELENGTH, 0, { 0, 0 } },
	{ "CREDIT len 1", M_CREDIT, { HDR_LEN_IS(1), END }, 17, 0, -SAN_PROTO_ELENGTH, 0, { 0, 0 } },
	{ "DISCONNECT len 8", M_DISC, { HDR_LEN_IS(8), END }, 24, 0, -SAN_PROTO_ELENGTH, 0, { 0, 0 } },
	/* body reserved fields */
	{ "HELLO rsvd", M_HELLO, { { 16 + 12, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "PROPOSE rsvd0", M_PROPOSE, { { 16 + 3, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "PROPOSE rsvd1", M_PROPOSE, { { 16 + 55, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "ACCEPT rsvd", M_ACCEPT, { { 16 + 4, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "REJECT rsvd", M_REJECT, { { 16 + 7, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "DATA first rsvd", M_DATA_FIRST, { { 16 + 15, 1 }, END }, 0, 0,
	  -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "DATA mode w/o first", M_DATA, { { 2, 1 << SAN_DATA_F_MODE_SHIFT }, END }, 0, 0,
	  -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "SRC_AVAIL rsvd", M_SRC, { { 16 + 4, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "READ_DONE rsvd", M_RDONE, { { 16 + 6, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "GRANT rsvd", M_GRANT, { { 16 + 7, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "WRITE_DONE rsvd", M_WDONE, { { 16 + 7, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "ABORT rsvd0", M_ABORT, { { 16 + 2, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	{ "ABORT rsvd1", M_ABORT_S, { { 16 + 7, 1 }, END }, 0, 0, -SAN_PROTO_ERESERVED, 0, { 0, 0 } },
	/* field ranges */
	{ "HELLO T=1", M_HELLO, { { 16 + 6, 0 }, { 16 + 7, 1 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "HELLO 2T+1>N", M_HELLO, { { 16 + 6, 0 }, { 16 + 7, 32 }, END }, 0, 0,
	  -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "HELLO max_msg 63", M_HELLO, { { 16 + 10, 0 }, { 16 + 11, 63 }, END }, 0, 0,
	  -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "HELLO max_msg huge", M_HELLO, { { 16 + 8, 0x10 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "HELLO nonce 0", M_HELLO, { END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 16 + 16, 8 } },
	{ "ACCEPT nonce 0", M_ACCEPT, { END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 16 + 8, 8 } },
	{ "PROPOSE nonce 0", M_PROPOSE, { END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 16 + 8, 8 } },
	{ "PROPOSE ver_min>max", M_PROPOSE, { { 16 + 0, 2 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "PROPOSE ver_min 0", M_PROPOSE, { { 16 + 0, 0 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "PROPOSE hdr ver out", M_PROPOSE, { { 16 + 0, 2 }, { 16 + 1, 3 }, END }, 0, 0,
	  -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "PROPOSE provider 0", M_PROPOSE, { { 16 + 2, 0 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "PROPOSE src port 0", M_PROPOSE, { { 16 + 48, 0 }, { 16 + 49, 0 }, END }, 0, 0,
	  -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "PROPOSE dst port 0", M_PROPOSE, { { 16 + 50, 0 }, { 16 + 51, 0 }, END }, 0, 0,
	  -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "REJECT ver_min 0", M_REJECT, { { 16 + 2, 0 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "SWITCH offset 2^62", M_SWITCH, { { 16 + 0, 0x40 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "DATA empty", M_DATA, { HDR_LEN_IS(0), END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "DATA total <= payload", M_DATA_FIRST,
	  { { 16 + 0, 0 }, { 16 + 5, 0 }, { 16 + 6, 0 }, { 16 + 7, 32 }, END }, 0, 0,
	  -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "DATA mode 3", M_DATA_FIRST, { { 2, SAN_DATA_F_FIRST | SAN_DATA_F_MODE_MASK }, END }, 0,
	  0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "SRC_AVAIL len 0", M_SRC,
	  { { 16 + 21, 0 }, { 16 + 22, 0 }, { 16 + 23, 0 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "READ_DONE status 2", M_RDONE, { { 16 + 5, 2 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "GRANT len 0", M_GRANT, { { 16 + 29, 0 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "DECLINE with addr", M_DECLINE, { { 16 + 23, 1 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "DECLINE with key", M_DECLINE, { { 16 + 39, 1 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "WRITE_DONE status 7", M_WDONE, { { 16 + 5, 7 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
	{ "CREDIT_UPDATE 0", M_CREDIT, { { 4, 0 }, { 5, 0 }, END }, 0, 0, -SAN_PROTO_ERANGE, 0, { 0, 0 } },
};
/* clang-format on */
#define NREJECTS (int)(sizeof(rejects) / sizeof(rejects[0]))

static int run_reject(const struct reject_case *r, struct san_msg *out)
{
	const struct msg_case *c = &msgs[r->base];
	enum san_chan chan = r->chan > 0 ? (enum san_chan)r->chan : c->chan;
	uint8_t buf[BUF];
	int n, len;

	memset(buf, 0, sizeof(buf));
	n = san_msg_encode(&c->m, buf, sizeof(buf));
	ck_assert_msg(n > 0, "%s: base does not encode", r->what);
	for (int i = 0; i < 6 && r->p[i].off >= 0; i++)
		buf[r->p[i].off] = r->p[i].val;
	memset(buf + r->zero.off, 0, r->zero.len);
	len = r->buflen > 0 ? r->buflen : (r->buflen < 0 ? 0 : n);
	return san_msg_decode(buf, len, chan, r->max_len ? r->max_len : SLOT, out);
}

START_TEST(test_reject)
{
	const struct reject_case *r = &rejects[_i];
	struct san_msg out;
	int err = run_reject(r, &out);

	ck_assert_msg(err == r->expect, "%s: got %s (%d), expected %s", r->what,
		      san_proto_errname(err) ? san_proto_errname(err) : san_proto_strerror(err),
		      err, san_proto_errname(r->expect));
}
END_TEST

/* The base messages used above really are valid, so each case breaks exactly its one rule. */
START_TEST(test_reject_bases_valid)
{
	for (int i = 0; i < NREJECTS; i++) {
		const struct msg_case *c = &msgs[rejects[i].base];
		uint8_t buf[BUF];
		struct san_msg out;
		int n = san_msg_encode(&c->m, buf, sizeof(buf));

		ck_assert_int_eq(san_msg_decode(buf, n, c->chan, SLOT, &out), 0);
	}
}
END_TEST

START_TEST(test_peek_len)
{
	uint8_t buf[BUF];
	uint32_t need = 0;
	int n = san_msg_encode(&msgs[M_PROPOSE].m, buf, sizeof(buf));

	ck_assert_int_eq(san_msg_peek_len(buf, n, SLOT, &need), 0);
	ck_assert_uint_eq(need, n);
	ck_assert_int_eq(san_msg_peek_len(buf, n, n - 1, &need), -SAN_PROTO_EOVERSIZE);
	buf[0] = 9;
	ck_assert_int_eq(san_msg_peek_len(buf, 1, SLOT, &need), -SAN_PROTO_EVERSION);
	ck_assert_int_eq(san_msg_peek_len(buf, 0, SLOT, &need), -SAN_PROTO_ETRUNC);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Sequence numbers and the MARK.                                                             */

START_TEST(test_seq_wraparound)
{
	struct san_msg m = { .seq = 5 };

	ck_assert(san_seq_before(1, 2));
	ck_assert(!san_seq_before(2, 1));
	ck_assert(!san_seq_before(7, 7));
	ck_assert(san_seq_before(0xffffffffu, 0));
	ck_assert(san_seq_before(0xfffffff0u, 0x10));
	ck_assert(!san_seq_before(0x10, 0xfffffff0u));
	ck_assert(san_seq_before(0, 0x7fffffffu));
	ck_assert(!san_seq_before(0, 0x80000001u));
	ck_assert_int_eq(san_msg_check_seq(&m, 5), 0);
	ck_assert_int_eq(san_msg_check_seq(&m, 4), -SAN_PROTO_ESEQ);
	ck_assert_int_eq(san_msg_check_seq(&m, 6), -SAN_PROTO_ESEQ);
}
END_TEST

START_TEST(test_mark)
{
	uint8_t b[SAN_MARK_LEN];
	const uint64_t nonce = 0x0102030405060708ull;

	san_mark_encode(b, SAN_PROTO_VERSION, nonce);
	ck_assert_int_eq(san_mark_check(b, SAN_PROTO_VERSION, nonce), 0);
	ck_assert_int_eq(san_mark_check(b, SAN_PROTO_VERSION, nonce + 1), -SAN_PROTO_ENONCE);
	ck_assert_int_eq(san_mark_check(b, 2, nonce), -SAN_PROTO_EMAGIC);
	/* Any changed byte is detected: 0-7 are constant (EMAGIC), 8-15 the nonce (ENONCE). */
	for (int i = 0; i < SAN_MARK_LEN; i++) {
		for (int bit = 0; bit < 8; bit++) {
			b[i] ^= 1u << bit;
			ck_assert_int_eq(san_mark_check(b, SAN_PROTO_VERSION, nonce),
					 i < 8 ? -SAN_PROTO_EMAGIC : -SAN_PROTO_ENONCE);
			b[i] ^= 1u << bit;
		}
	}
	/* Application data that happens to sit at the offset is not a MARK. */
	ck_assert_int_eq(san_mark_check("GET / HTTP/1.1\r\n", SAN_PROTO_VERSION, nonce),
			 -SAN_PROTO_EMAGIC);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Each distinct code is reachable from bytes a peer controls.                                 */

START_TEST(test_every_code_provoked)
{
	int seen[SAN_PROTO_EEND - SAN_PROTO_EBASE] = { 0 };
	struct san_msg out;
	uint8_t b[64];
	struct san_credit cr;
	uint16_t ret;
	size_t flen;
	int n;

	for (int i = 0; i < NREJECTS; i++)
		seen[-run_reject(&rejects[i], &out) - SAN_PROTO_EBASE]++;

	out.seq = 1;
	seen[-san_msg_check_seq(&out, 2) - SAN_PROTO_EBASE]++;
	san_mark_encode(b, 1, 7);
	seen[-san_mark_check(b, 1, 8) - SAN_PROTO_EBASE]++;
	b[4] = 0;
	seen[-san_mark_check(b, 1, 7) - SAN_PROTO_EBASE]++;

	n = san_msg_encode(&msgs[M_SWITCH].m, b, sizeof(b));
	ck_assert_int_gt(san_frame_seal(b, sizeof(b)), n);
	b[20] ^= 1;
	seen[-san_frame_check(b, sizeof(b), msgs[M_SWITCH].m.seq, SLOT, &flen) - SAN_PROTO_EBASE]++;

	ck_assert_int_eq(san_credit_init(&cr, 8, 2), 0);
	ck_assert_int_eq(san_credit_on_send(&cr, SAN_T_HELLO, &ret), 0);
	seen[-san_credit_on_recv(&cr, SAN_T_DATA, 0, 0, 0) - SAN_PROTO_EBASE]++;

	for (int e = SAN_PROTO_EBASE; e < SAN_PROTO_EEND; e++)
		ck_assert_msg(seen[e - SAN_PROTO_EBASE], "%s never provoked", san_proto_errname(e));
}
END_TEST

Suite *make_msg_suite(void)
{
	Suite *s = suite_create("msg");
	TCase *tc;

	tc = tcase_create("round_trip");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_round_trip, 0, NMSGS);
	tcase_add_loop_test(tc, test_every_prefix_truncated, 0, NMSGS);
	tcase_add_loop_test(tc, test_wrong_channel, 0, NMSGS);
	tcase_add_test(tc, test_encode_refuses);
	tcase_add_test(tc, test_payload_in_place);
	suite_add_tcase(s, tc);

	tc = tcase_create("reject");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_reject, 0, NREJECTS);
	tcase_add_test(tc, test_reject_bases_valid);
	tcase_add_test(tc, test_peek_len);
	tcase_add_test(tc, test_every_code_provoked);
	suite_add_tcase(s, tc);

	tc = tcase_create("seq_mark");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_seq_wraparound);
	tcase_add_test(tc, test_mark);
	suite_add_tcase(s, tc);
	return s;
}
