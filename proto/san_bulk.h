/* proto: the transfer-mode decision for one application send (inline, copy, read, grant). */
#ifndef SAN_BULK_H
#define SAN_BULK_H

#include <stdbool.h>
#include <stdint.h>

/*
 * How the bytes of one send travel. INLINE: one DATA message. The other three start with a
 * DATA carrying SAN_DATA_F_FIRST, the total length and the first bytes, then:
 *   COPY   more DATA messages through the pre-registered slots (the always-available path);
 *   READ   one SRC_AVAIL; the receiver reads the rest and answers READ_DONE;
 *   GRANT  the receiver sends WRITE_GRANTs; the sender writes, then WRITE_DONE.
 */
enum san_xfer_mode {
	SAN_XFER_INLINE,
	SAN_XFER_COPY,
	SAN_XFER_READ,
	SAN_XFER_GRANT,
};

enum san_bulk_policy {
	SAN_BULK_AUTO,	    /* read if the peer can, else grant, else copy */
	SAN_BULK_NO_READ,   /* never ask the peer to read (grant or copy) */
	SAN_BULK_COPY_ONLY, /* never zero-copy */
};

struct san_bulk_in {
	uint64_t len;	     /* bytes the application is sending */
	uint32_t inline_max; /* largest send that goes as one DATA */
	uint32_t zcopy_min;  /* smallest send worth registering memory for */
	uint32_t local_caps; /* our SAN_CAP_* (as sent in our HELLO) */
	uint32_t peer_caps;  /* the peer's, from its HELLO */
	enum san_bulk_policy policy;
	bool can_register; /* the source buffer can be registered (verbs) / described (shm) */
	bool can_alloc;	   /* temporary memory for a copy can be had */
};

/*
 * Returns the mode (>= 0), -ENOBUFS when neither registration nor a temporary copy is possible
 * (the send fails, nothing is lost, the connection stays usable), or -EINVAL for len 0.
 */
int san_bulk_choose(const struct san_bulk_in *in);

/* Payload bytes of the first DATA of a non-inline transfer: the rest is what stays >= 1. */
uint32_t san_bulk_first_len(uint64_t len, uint32_t max_payload);

/* Largest DATA payload that fits a slot of max_msg bytes, first chunk or not. */
uint32_t san_data_max_payload(uint32_t max_msg, bool first);

#endif /* SAN_BULK_H */
