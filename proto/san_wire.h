/* proto: session protocol v1 on the wire — constants and byte layouts (see docs/protocol.md). */
#ifndef SAN_WIRE_H
#define SAN_WIRE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every multi-byte field below is big-endian (network order) on the wire. These structs are
 * the wire image only: nothing outside proto/san_msg.c reads or writes them, and that file
 * converts in exactly one encode/decode pair. Fields are laid out at their natural alignment
 * so that the compiler adds no padding; the _Static_asserts prove it, so a layout change
 * cannot slip through without touching the assert (and docs/protocol.md, which it names).
 */

#define SAN_PROTO_VERSION 1 /* the only version this build speaks */
#define SAN_VERSION_MIN 1
#define SAN_VERSION_MAX 1

/* Message types. 0x01-0x0f: setup (side channel); 0x10-0x1f: session (SAN channel). */
enum san_type {
	SAN_T_HELLO = 0x01,	    /* session: first message in each direction */
	SAN_T_PROPOSE = 0x02,	    /* side: A -> B, asks to upgrade one TCP connection */
	SAN_T_ACCEPT = 0x03,	    /* side: B -> A, B's TCP reader is now paused */
	SAN_T_REJECT = 0x04,	    /* side: B -> A, stay on TCP */
	SAN_T_SWITCH = 0x05,	    /* side: announces the sender's TCP tx byte offset */
	SAN_T_MARK = 0x06,	    /* in-band on TCP, not a framed message: see san_wire_mark */
	SAN_T_DATA = 0x10,	    /* session: inline payload */
	SAN_T_SRC_AVAIL = 0x11,	    /* session: rest of a transfer, readable at addr/key */
	SAN_T_READ_DONE = 0x12,	    /* session: receiver finished (or gave up) reading */
	SAN_T_WRITE_GRANT = 0x13,   /* session: receiver offers addr/key to write into */
	SAN_T_WRITE_DONE = 0x14,    /* session: sender finished (or gave up) writing */
	SAN_T_CREDIT_UPDATE = 0x15, /* session: returns credits, nothing else */
	SAN_T_DISCONNECT = 0x16,    /* session: orderly end of the sender's stream (FIN) */
	SAN_T_ABORT = 0x17,	    /* side or session: abandon (pre-commit) / reset (after) */
	SAN_T_KEEPALIVE = 0x18,	    /* session: liveness probe and reply */
	SAN_T_RCV_WINDOW = 0x19,    /* session (verbs): receive window, bytes read so far */
};

/* Capability bits (PROPOSE, ACCEPT, HELLO). Unknown bits are ignored, never rejected. */
#define SAN_CAP_RDMA_READ 0x00000001u  /* advertiser can read from its peer: send it SRC_AVAIL */
#define SAN_CAP_RDMA_WRITE 0x00000002u /* advertiser can write into a peer's WRITE_GRANT */
#define SAN_CAP_DIRECT_READ 0x00000004u /* shm: advertiser reads a sender's own buffer offered in
					 * the ring's source slot (process_vm_readv) */
#define SAN_CAP_RETRIES 0x00000008u /* PROPOSE only: the proposer proposes again later, so
					 * refuse at once what cannot be answered now (a
					 * connection still in the accept queue): never hold it */
#define SAN_CAP_RCV_WINDOW 0x00000010u /* verbs setup: advertiser sends RCV_WINDOW and bounds
					* its sends by the peer's (docs/protocol.md, "Socket
					* buffer sizes") */
#define SAN_CAP_UNHASHED 0x00000020u /* PROPOSE, ACCEPT (shm): the advertiser takes ring frames
				      * whose trailer hash is 0 as sealed without a hash: its
				      * peer may skip XXH64 (the producer index orders shm's
				      * bytes: docs/protocol.md §6) */
#define SAN_CAP_MARK_DELIVERED 0x00000040u /* verbs setup: the advertiser writes its MARK only
					    * once its first stream bytes (or its end) are on
					    * the peer's card, so a reader past it may wait for
					    * them (docs/protocol.md §9.2 rule 3) */
#define SAN_CAP_NOPAUSE 0x00000080u /* PROPOSE, ACCEPT (shm): the no-pause switch-over: no
				     * reader pauses; each direction commits alone through the
				     * switch-over word of its ring (docs/protocol.md §16) */
#define SAN_CAP_KNOWN (SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE | SAN_CAP_DIRECT_READ | \
		       SAN_CAP_RETRIES | SAN_CAP_RCV_WINDOW | SAN_CAP_UNHASHED | \
		       SAN_CAP_MARK_DELIVERED | SAN_CAP_NOPAUSE)

/* Per-type flag bits (header byte 2). Any bit not listed for a type is reserved. */
#define SAN_DATA_F_FIRST 0x01	  /* first chunk of a transfer: body carries total length */
#define SAN_DATA_F_MODE_MASK 0x06 /* with FIRST: how the rest of the transfer arrives */
#define SAN_DATA_F_MODE_SHIFT 1
#define SAN_GRANT_F_DECLINE 0x01 /* receiver cannot grant: send the rest as DATA */
#define SAN_KA_F_PROBE 0x01	 /* reply requested */

/* How the rest of a transfer (after its first DATA) travels; DATA flags bits 1-2. */
enum san_xfer_wire_mode {
	SAN_XMODE_COPY = 0,  /* more DATA messages */
	SAN_XMODE_READ = 1,  /* one SRC_AVAIL; the receiver reads */
	SAN_XMODE_GRANT = 2, /* receiver sends WRITE_GRANTs; the sender writes */
};

/* READ_DONE / WRITE_DONE status. */
enum san_xfer_status {
	SAN_XS_OK = 0,	   /* the whole region moved */
	SAN_XS_FAILED = 1, /* only len bytes moved: the rest follows as DATA */
};

/*
 * Reason codes carried by REJECT and ABORT and recorded as the fallback reason. One namespace
 * for both so sanstat shows one table. Receivers accept any value (an ABORT must never be lost
 * to validation); values above SAN_R_MAX are shown as "unknown".
 */
enum san_reason {
	SAN_R_NONE = 0,
	SAN_R_VERSION = 1,     /* no common protocol version */
	SAN_R_NOT_OWNER = 2,   /* no TCP connection with that 4-tuple is held by the acceptor */
	SAN_R_CREDENTIALS = 3, /* uid/pid proof of ownership failed */
	SAN_R_POLICY = 4,      /* configuration forbids switching this connection */
	SAN_R_RESOURCES = 5,   /* memory, registration or provider resources exhausted */
	SAN_R_PROVIDER = 6,    /* proposed provider unsupported or failed to set up */
	SAN_R_BUSY = 7,	       /* an upgrade of this connection is already in progress */
	SAN_R_STATE = 8,       /* connection cannot switch now (closing, shut down, urgent data) */
	SAN_R_MALFORMED = 9,   /* a setup message failed validation */
	SAN_R_TIMEOUT = 10,    /* the proposer's ACCEPT timer fired */
	SAN_R_LOCAL = 11,      /* the proposer changed its mind (app closed, error) before commit */
	SAN_R_PROTOCOL = 12,   /* peer broke the protocol */
	SAN_R_MARK = 13,       /* MARK missing or wrong at the announced offset */
	SAN_R_CHANNEL = 14,    /* side or SAN channel failed after commit */
	SAN_R_TCP = 15,	       /* TCP connection failed during the upgrade */
	SAN_R_APP_RESET = 16,  /* application reset the connection (SO_LINGER 0, like RST) */
	SAN_R_KEEPALIVE = 17,  /* peer stopped answering keepalives */
	SAN_R_MAX = SAN_R_KEEPALIVE
};

/* Provider identifiers: opaque to proto/, used by the engine's dispatcher only. */
#define SAN_PROV_SHM 1
#define SAN_PROV_VERBS 2

#define SAN_MARK_MAGIC 0x53414e4du /* "SANM" */

/* Limits. */
#define SAN_HDR_LEN 16
#define SAN_MARK_LEN 16
#define SAN_PARAMS_MAX 192	    /* provider parameters in PROPOSE/ACCEPT, bytes */
#define SAN_MSG_MIN 64		    /* smallest receive slot a peer may announce (HELLO max_msg) */
#define SAN_MSG_MAX (1u << 24)	    /* largest message anyone may announce or send */
#define SAN_SIDE_MSG_MAX 512	    /* max_len for side-channel messages (PROPOSE: 16 + 56 + 192) */
#define SAN_OFFSET_MAX (1ull << 62) /* TCP byte offsets and region lengths stay below this */
#define SAN_POOL_MAX 65535	    /* credits travel in 16 bits */

/* ------------------------------------------------------------------------------------------ */
/* Common header, 16 bytes, first in every framed message on both channels.                     */

struct san_wire_hdr {
	uint8_t version;  /* SAN_PROTO_VERSION; byte 0 keeps this meaning in every version */
	uint8_t type;	  /* enum san_type; byte 1 keeps this meaning in every version */
	uint8_t flags;	  /* per-type flag bits; undefined bits must be zero */
	uint8_t rsvd0;	  /* zero */
	uint16_t credits; /* receive slots freed since the sender's previous message */
	uint16_t rsvd1;	  /* zero */
	uint32_t seq;	  /* per channel and direction, from 0, wraps */
	uint32_t len;	  /* bytes after this header: body + payload (not the ring trailer) */
};
_Static_assert(sizeof(struct san_wire_hdr) == SAN_HDR_LEN,
	       "header size changed: update SAN_HDR_LEN, docs/protocol.md §Header, check_wire.c");
_Static_assert(offsetof(struct san_wire_hdr, credits) == 4 &&
		       offsetof(struct san_wire_hdr, seq) == 8 &&
		       offsetof(struct san_wire_hdr, len) == 12,
	       "header field moved: update docs/protocol.md §Header and check_wire.c");

/* ------------------------------------------------------------------------------------------ */
/* Setup messages (side channel).                                                               */

/* PROPOSE body, 56 bytes, then 0..SAN_PARAMS_MAX bytes of provider parameters. */
struct san_wire_propose {
	uint8_t ver_min;      /* lowest version the proposer speaks */
	uint8_t ver_max;      /* highest; the header carries the one proposed */
	uint8_t provider;     /* SAN_PROV_*, opaque to proto/ */
	uint8_t rsvd0;	      /* zero */
	uint32_t caps;	      /* SAN_CAP_* of the proposer */
	uint64_t nonce;	      /* nonce_A: B writes it in its MARK; nonzero */
	uint8_t src_addr[16]; /* A's local address, IPv6 or IPv4-mapped (::ffff:a.b.c.d) */
	uint8_t dst_addr[16]; /* A's remote address (B's local) */
	uint16_t src_port;    /* A's local port, nonzero */
	uint16_t dst_port;    /* A's remote port, nonzero */
	uint32_t rsvd1;	      /* zero */
};
_Static_assert(sizeof(struct san_wire_propose) == 56,
	       "PROPOSE body size changed: update docs/protocol.md §PROPOSE and check_wire.c");
_Static_assert(offsetof(struct san_wire_propose, nonce) == 8 &&
		       offsetof(struct san_wire_propose, src_addr) == 16 &&
		       offsetof(struct san_wire_propose, src_port) == 48,
	       "PROPOSE field moved: update docs/protocol.md §PROPOSE and check_wire.c");

_Static_assert(
	SAN_HDR_LEN + sizeof(struct san_wire_propose) + SAN_PARAMS_MAX <= SAN_SIDE_MSG_MAX,
	"largest PROPOSE no longer fits SAN_SIDE_MSG_MAX: raise it, update docs/protocol.md");

/* ACCEPT body, 16 bytes, then 0..SAN_PARAMS_MAX bytes of provider parameters. */
struct san_wire_accept {
	uint32_t caps;	/* SAN_CAP_* of the acceptor */
	uint32_t rsvd;	/* zero */
	uint64_t nonce; /* nonce_B: A writes it in its MARK; nonzero */
};
_Static_assert(sizeof(struct san_wire_accept) == 16 && offsetof(struct san_wire_accept, nonce) == 8,
	       "ACCEPT layout changed: update docs/protocol.md §ACCEPT and check_wire.c");

/* REJECT body, 8 bytes. */
struct san_wire_reject {
	uint16_t reason; /* enum san_reason */
	uint8_t ver_min; /* the acceptor's supported versions, so A can retry once */
	uint8_t ver_max;
	uint32_t rsvd; /* zero */
};
_Static_assert(sizeof(struct san_wire_reject) == 8 &&
		       offsetof(struct san_wire_reject, ver_min) == 2,
	       "REJECT layout changed: update docs/protocol.md §REJECT and check_wire.c");

/* SWITCH body, 8 bytes. */
struct san_wire_switch {
	uint64_t offset; /* bytes the sender has written to TCP, ever; the MARK follows them */
};
_Static_assert(sizeof(struct san_wire_switch) == 8,
	       "SWITCH layout changed: update docs/protocol.md §SWITCH and check_wire.c");

/*
 * MARK, 16 bytes, written raw into the TCP byte stream right after the announced offset. It
 * is not framed by the common header (it never travels on the side or SAN channel) but keeps
 * version and type in bytes 0 and 1 so that a dump of the TCP stream reads the same way.
 */
struct san_wire_mark {
	uint8_t version; /* the negotiated version */
	uint8_t type;	 /* SAN_T_MARK */
	uint16_t rsvd;	 /* zero */
	uint32_t magic;	 /* SAN_MARK_MAGIC */
	uint64_t nonce;	 /* the nonce the *reader* chose on the side channel */
};
_Static_assert(sizeof(struct san_wire_mark) == SAN_MARK_LEN &&
		       offsetof(struct san_wire_mark, magic) == 4 &&
		       offsetof(struct san_wire_mark, nonce) == 8,
	       "MARK layout changed: update SAN_MARK_LEN, docs/protocol.md §MARK and check_wire.c");

/* ------------------------------------------------------------------------------------------ */
/* Session messages (SAN channel).                                                              */

/* HELLO body, 24 bytes. */
struct san_wire_hello {
	uint32_t caps;	    /* SAN_CAP_* in force; may clear bits advertised in setup, never add */
	uint16_t pool;	    /* receive slots posted for the peer (N), its initial credits */
	uint16_t threshold; /* T: the sender returns credits once T are pending; 2 <= T, 2T < N */
	uint32_t max_msg;   /* largest message (header + len) one slot holds */
	uint32_t rsvd;	    /* zero */
	uint64_t nonce;	    /* the receiver's nonce, as in the MARK: binds the session */
};
_Static_assert(sizeof(struct san_wire_hello) == 24 && offsetof(struct san_wire_hello, nonce) == 16,
	       "HELLO layout changed: update docs/protocol.md §HELLO and check_wire.c");

/* DATA body: empty, or 16 bytes when SAN_DATA_F_FIRST is set; then the payload. */
struct san_wire_data_first {
	uint64_t total_len; /* whole transfer, this payload included; > payload length */
	uint32_t xfer_id;   /* names the transfer in SRC_AVAIL/WRITE_GRANT/..._DONE */
	uint32_t rsvd;	    /* zero */
};
_Static_assert(sizeof(struct san_wire_data_first) == 16,
	       "DATA first-chunk body changed: update docs/protocol.md §DATA and check_wire.c");

/* SRC_AVAIL body, 32 bytes. */
struct san_wire_src_avail {
	uint32_t xfer_id;
	uint32_t rsvd; /* zero */
	uint64_t addr; /* provider address of the first byte of the rest */
	uint64_t len;  /* bytes: exactly the rest of the transfer; nonzero */
	uint64_t key;  /* rkey (verbs) or cookie (shm) */
};
_Static_assert(sizeof(struct san_wire_src_avail) == 32 &&
		       offsetof(struct san_wire_src_avail, addr) == 8 &&
		       offsetof(struct san_wire_src_avail, key) == 24,
	       "SRC_AVAIL layout changed: update docs/protocol.md §SRC_AVAIL and check_wire.c");

/* READ_DONE body, 16 bytes. */
struct san_wire_read_done {
	uint32_t xfer_id;
	uint16_t status; /* enum san_xfer_status */
	uint16_t rsvd;	 /* zero */
	uint64_t len;	 /* bytes read: all of them if OK, a prefix if FAILED */
};
_Static_assert(sizeof(struct san_wire_read_done) == 16 &&
		       offsetof(struct san_wire_read_done, len) == 8,
	       "READ_DONE layout changed: update docs/protocol.md §READ_DONE and check_wire.c");

/* WRITE_GRANT body, 40 bytes. */
struct san_wire_write_grant {
	uint32_t xfer_id;
	uint32_t rsvd;	 /* zero */
	uint64_t offset; /* where in the rest of the transfer this grant starts */
	uint64_t addr;	 /* zero with DECLINE */
	uint64_t len;	 /* nonzero, or zero with DECLINE */
	uint64_t key;	 /* zero with DECLINE */
};
_Static_assert(sizeof(struct san_wire_write_grant) == 40 &&
		       offsetof(struct san_wire_write_grant, offset) == 8 &&
		       offsetof(struct san_wire_write_grant, key) == 32,
	       "WRITE_GRANT layout changed: update docs/protocol.md §WRITE_GRANT and check_wire.c");

/* WRITE_DONE body, 24 bytes. */
struct san_wire_write_done {
	uint32_t xfer_id;
	uint16_t status; /* enum san_xfer_status */
	uint16_t rsvd;	 /* zero */
	uint64_t offset; /* the grant's offset */
	uint64_t len;	 /* bytes written into that grant (a valid prefix if FAILED) */
};
_Static_assert(sizeof(struct san_wire_write_done) == 24 &&
		       offsetof(struct san_wire_write_done, offset) == 8,
	       "WRITE_DONE layout changed: update docs/protocol.md §WRITE_DONE and check_wire.c");

/* ABORT body, 8 bytes. */
struct san_wire_abort {
	uint16_t reason; /* enum san_reason */
	uint16_t rsvd0;	 /* zero */
	uint32_t rsvd1;	 /* zero */
};
_Static_assert(sizeof(struct san_wire_abort) == 8,
	       "ABORT layout changed: update docs/protocol.md §ABORT and check_wire.c");

/* KEEPALIVE body, 8 bytes. */
struct san_wire_keepalive {
	uint64_t token; /* echoed unchanged in the reply */
};
_Static_assert(sizeof(struct san_wire_keepalive) == 8,
	       "KEEPALIVE layout changed: update docs/protocol.md §KEEPALIVE and check_wire.c");

/*
 * RCV_WINDOW body, 16 bytes (verbs, where the peer's reads are not shared memory): the
 * receiver's window and the frame bytes its application has read so far.
 */
struct san_wire_rcv_window {
	uint32_t window;   /* SO_RCVBUF as the kernel reports it; 0: unbounded */
	uint32_t rsvd;	   /* zero */
	uint64_t consumed; /* frame bytes (header, body, trailer, alignment) read, from the HELLO */
};
_Static_assert(sizeof(struct san_wire_rcv_window) == 16 &&
		       offsetof(struct san_wire_rcv_window, consumed) == 8,
	       "RCV_WINDOW layout changed: update docs/protocol.md §RCV_WINDOW and check_wire.c");

/* CREDIT_UPDATE and DISCONNECT have no body. */

_Static_assert(
	SAN_HDR_LEN + sizeof(struct san_wire_write_grant) <= SAN_MSG_MIN &&
		SAN_HDR_LEN + sizeof(struct san_wire_hello) <= SAN_MSG_MIN,
	"a fixed-size session message outgrew SAN_MSG_MIN: raise it, update docs/protocol.md");

/* ------------------------------------------------------------------------------------------ */
/* Ring-frame trailer, after a message placed by a one-sided write (shm ring, RDMA-write ring). */

struct san_wire_trailer {
	uint32_t seq;  /* equals the header's seq */
	uint32_t rsvd; /* zero */
	uint64_t hash; /* XXH64, seed 0, of every frame byte before this field */
};
_Static_assert(sizeof(struct san_wire_trailer) == 16 &&
		       offsetof(struct san_wire_trailer, hash) == 8,
	       "trailer layout changed: update SAN_TRAILER_LEN, docs/protocol.md §Ring frames");
#define SAN_TRAILER_LEN 16
#define SAN_FRAME_ALIGN 8

#endif /* SAN_WIRE_H */
