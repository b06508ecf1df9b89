/* proto: host-order messages and their one encode/decode pair, with validation. */
#ifndef SAN_MSG_H
#define SAN_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/san_err.h"
#include "proto/san_wire.h"

/* Which channel a message travels on; decode rejects a type that does not belong there. */
enum san_chan {
	SAN_CHAN_SIDE = 1,    /* the side channel: setup messages and pre-commit ABORT */
	SAN_CHAN_SESSION = 2, /* the SAN channel after switch-over */
};

/* Host-order views of the bodies. Pointers point into the buffer given to decode. */
struct san_hello {
	uint32_t caps;
	uint16_t pool;
	uint16_t threshold;
	uint32_t max_msg;
	uint64_t nonce;
};

struct san_addr {
	uint8_t addr[16]; /* IPv6, or IPv4-mapped */
	uint16_t port;
};

struct san_propose {
	uint8_t ver_min, ver_max;
	uint8_t provider;
	uint32_t caps; /* unknown bits already cleared by decode */
	uint64_t nonce;
	struct san_addr src, dst; /* as the proposer sees the TCP connection */
	const void *params;	  /* provider parameters, opaque here */
	uint16_t params_len;
};

struct san_accept {
	uint32_t caps; /* unknown bits already cleared by decode */
	uint64_t nonce;
	const void *params;
	uint16_t params_len;
};

struct san_reject {
	uint16_t reason;
	uint8_t ver_min, ver_max;
};

struct san_switch {
	uint64_t offset;
};

struct san_data {
	bool first;	    /* SAN_DATA_F_FIRST */
	uint8_t mode;	    /* enum san_xfer_wire_mode, with first only */
	uint64_t total_len; /* with first only */
	uint32_t xfer_id;   /* with first only */
	/*
	 * Encode copies payload_len bytes from payload; with payload NULL it only reserves the
	 * space, so the caller can copy straight from the application (see san_msg_payload()).
	 */
	const void *payload;
	uint32_t payload_len;
};

struct san_src_avail {
	uint32_t xfer_id;
	uint64_t addr, len, key;
};

struct san_read_done {
	uint32_t xfer_id;
	uint16_t status;
	uint64_t len;
};

struct san_write_grant {
	uint32_t xfer_id;
	bool decline;
	uint64_t offset, addr, len, key;
};

struct san_write_done {
	uint32_t xfer_id;
	uint16_t status;
	uint64_t offset, len;
};

struct san_abort {
	uint16_t reason;
};

struct san_keepalive {
	bool probe;
	uint64_t token;
};

struct san_rcv_window {
	uint32_t window;
	uint64_t consumed;
};

struct san_msg {
	/* Common header. version is filled by decode; encode always writes SAN_PROTO_VERSION. */
	uint8_t version;
	uint8_t type;	  /* enum san_type */
	uint16_t credits; /* credits returned */
	uint32_t seq;
	uint32_t wire_len; /* decode: header + len, i.e. bytes this message occupies */
	union {
		struct san_hello hello;
		struct san_propose propose;
		struct san_accept accept;
		struct san_reject reject;
		struct san_switch sw;
		struct san_data data;
		struct san_src_avail src_avail;
		struct san_read_done read_done;
		struct san_write_grant write_grant;
		struct san_write_done write_done;
		struct san_abort abort;
		struct san_keepalive keepalive;
		struct san_rcv_window rcv_window;
	} u;
};

/* Name of a type ("DATA"), or NULL if unknown. */
const char *san_type_name(uint8_t type);

/* True if the type is a framed message allowed on chan. */
bool san_type_on_chan(uint8_t type, enum san_chan chan);

/* Bytes the encoded message will occupy (header + body + payload), or -EINVAL. */
int san_msg_size(const struct san_msg *m);

/*
 * Encode m into buf. Returns the bytes written (san_msg_size()), -ENOSPC if cap is too small,
 * -EINVAL if m is not a valid message (encode never emits what decode would reject).
 */
int san_msg_encode(const struct san_msg *m, void *buf, size_t cap);

/*
 * Decode and validate the message at the start of buf (buf may hold more bytes after it).
 * max_len bounds header + len (the receive slot size, or the side channel's limit). Returns 0
 * and fills m, or one distinct -SAN_PROTO_E* per broken rule, checked in this order: version,
 * header truncation, type, channel, header reserved fields and undefined flags, oversize,
 * truncation of the declared length, body length, body reserved fields, field ranges. The
 * sequence number is not judged here: see san_msg_check_seq().
 */
int san_msg_decode(const void *buf, size_t buflen, enum san_chan chan, uint32_t max_len,
		   struct san_msg *m);

/*
 * For stream transports: how many bytes the message starting at buf occupies. Returns 0 and
 * sets *need once the header is complete, -SAN_PROTO_ETRUNC while fewer than SAN_HDR_LEN bytes
 * are there, -SAN_PROTO_EVERSION or -SAN_PROTO_EOVERSIZE if the header can never become valid.
 */
int san_msg_peek_len(const void *buf, size_t buflen, uint32_t max_len, uint32_t *need);

/* Where the payload of an encoded DATA message starts (for filling it after encode). */
void *san_msg_payload(void *buf, const struct san_msg *m);

/* Sequence numbers: wraparound-safe comparison and the in-order check. */
bool san_seq_before(uint32_t a, uint32_t b);
int san_msg_check_seq(const struct san_msg *m, uint32_t expected);

/* MARK: encode into 16 bytes; check 16 read bytes against the nonce this side chose. */
void san_mark_encode(void *buf, uint8_t version, uint64_t nonce);
int san_mark_check(const void *buf, uint8_t version, uint64_t expected_nonce);

/* Capabilities: clear bits this build does not know. */
uint32_t san_caps_known(uint32_t caps);

/* HELLO may clear capability bits advertised during setup, never add one. */
bool san_caps_hello_ok(uint32_t setup_caps, uint32_t hello_caps);

/* Text for a reason code ("timeout"); "unknown" for values this build does not know. */
const char *san_reason_str(uint16_t reason);

#endif /* SAN_MSG_H */
