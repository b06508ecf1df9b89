/* proto: ring frames — seal on the writer's side, check on the reader's. */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "proto/san_frame.h"
#include "proto/san_hash.h"

static size_t san_align8(size_t n)
{
	return (n + SAN_FRAME_ALIGN - 1) & ~(size_t)(SAN_FRAME_ALIGN - 1);
}

size_t san_frame_len(uint32_t wire_len)
{
	return san_align8(wire_len) + SAN_TRAILER_LEN;
}

/* The hash covers everything before the hash field: message, pad, trailer seq and rsvd. */
static uint64_t san_frame_hash(const uint8_t *frame, size_t trailer_off)
{
	return san_xxh64(frame, trailer_off + offsetof(struct san_wire_trailer, hash), 0);
}

static int frame_seal(void *frame, size_t cap, bool hash)
{
	uint8_t *f = frame;
	struct san_wire_hdr h;
	struct san_wire_trailer t;
	size_t wire_len, off;

	if (cap < SAN_HDR_LEN)
		return -ENOSPC;
	memcpy(&h, f, sizeof(h));
	if (h.version < SAN_VERSION_MIN || h.version > SAN_VERSION_MAX)
		return -EINVAL;
	wire_len = SAN_HDR_LEN + (size_t)be32toh(h.len);
	if (wire_len > SAN_MSG_MAX)
		return -EINVAL;
	off = san_align8(wire_len);
	if (off + SAN_TRAILER_LEN > cap)
		return -ENOSPC;

	memset(f + wire_len, 0, off - wire_len);
	t.seq = h.seq; /* already big-endian */
	t.rsvd = 0;
	memcpy(f + off, &t, offsetof(struct san_wire_trailer, hash));
	t.hash = hash ? htobe64(san_frame_hash(f, off)) : 0;
	memcpy(f + off, &t, sizeof(t));
	return (int)(off + SAN_TRAILER_LEN);
}

int san_frame_seal(void *frame, size_t cap)
{
	return frame_seal(frame, cap, true);
}

int san_frame_seal_unhashed(void *frame, size_t cap)
{
	return frame_seal(frame, cap, false);
}

/* What a reader checks of the trailer's hash. */
enum hash_rule {
	HASH_NONE,	  /* checked whole before */
	HASH_ALWAYS,	  /* it must match */
	HASH_UNLESS_ZERO, /* 0: sealed without one (SAN_CAP_UNHASHED); else it must match */
};

static int frame_check(const void *buf, size_t avail, uint32_t expected_seq, uint32_t max_len,
		       size_t *frame_len, enum hash_rule hash)
{
	const uint8_t *f = buf;
	struct san_wire_hdr h;
	struct san_wire_trailer t;
	uint64_t wire_len;
	size_t off;

	if (avail < SAN_HDR_LEN)
		return -SAN_PROTO_ETRUNC;
	memcpy(&h, f, sizeof(h));
	/*
	 * The seq test comes first: an unwritten or stale slot is the common case for a polling
	 * reader and must be cheap. Only then is the length trusted enough to find the trailer.
	 */
	if (be32toh(h.seq) != expected_seq)
		return -SAN_PROTO_ESEQ;
	if (h.version < SAN_VERSION_MIN || h.version > SAN_VERSION_MAX)
		return -SAN_PROTO_EVERSION;
	wire_len = SAN_HDR_LEN + (uint64_t)be32toh(h.len);
	if (wire_len > max_len || wire_len > SAN_MSG_MAX)
		return -SAN_PROTO_EOVERSIZE;
	off = san_align8((size_t)wire_len);
	if (off + SAN_TRAILER_LEN > avail)
		return -SAN_PROTO_ETRUNC;
	memcpy(&t, f + off, sizeof(t));
	if (be32toh(t.seq) != expected_seq)
		return -SAN_PROTO_ESEQ;
	if ((hash == HASH_ALWAYS || (hash == HASH_UNLESS_ZERO && t.hash)) &&
	    be64toh(t.hash) != san_frame_hash(f, off))
		return -SAN_PROTO_EHASH;
	*frame_len = off + SAN_TRAILER_LEN;
	return 0;
}

int san_frame_check(const void *buf, size_t avail, uint32_t expected_seq, uint32_t max_len,
		    size_t *frame_len)
{
	return frame_check(buf, avail, expected_seq, max_len, frame_len, HASH_ALWAYS);
}

int san_frame_check_known(const void *buf, size_t avail, uint32_t expected_seq, uint32_t max_len,
			  size_t *frame_len)
{
	return frame_check(buf, avail, expected_seq, max_len, frame_len, HASH_NONE);
}

int san_frame_check_unhashed_ok(const void *buf, size_t avail, uint32_t expected_seq,
				uint32_t max_len, size_t *frame_len)
{
	return frame_check(buf, avail, expected_seq, max_len, frame_len, HASH_UNLESS_ZERO);
}
