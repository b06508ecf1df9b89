/* proto: ring frames — a message plus the seq/hash trailer that makes one-sided writes safe. */
#ifndef SAN_FRAME_H
#define SAN_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "proto/san_err.h"
#include "proto/san_wire.h"

/*
 * A message placed in the receiver's memory by a one-sided write (the shm ring; an RDMA-write
 * ring later) gives the receiver no completion telling it the write is over, and the bytes may
 * land in any order. So the writer seals each frame:
 *
 *   | header | body + payload | zero pad to 8 | trailer: seq, rsvd, XXH64 |
 *
 * and the reader consumes a frame only when the header's seq is the one it expects, the
 * trailer repeats that seq, and the hash over every byte before the hash field matches. A
 * half-written frame fails one of the three (with probability 1 - 2^-64 for the hash), so it
 * is left alone and looked at again later; a stale frame from the previous lap of the ring
 * fails the seq test.
 */

/* Bytes a frame occupies for a message of wire_len bytes (header included). */
size_t san_frame_len(uint32_t wire_len);

/*
 * Seal the message already encoded at the start of frame: zero the pad, write the trailer.
 * Returns the frame length, -ENOSPC if cap is too small, -EINVAL if no valid header is there.
 */
int san_frame_seal(void *frame, size_t cap);

/*
 * The same with the trailer's hash left 0: for a reader that said it takes such frames
 * (SAN_CAP_UNHASHED), where something else orders the bytes (shm's producer index).
 */
int san_frame_seal_unhashed(void *frame, size_t cap);

/*
 * Judge the frame at the start of buf (avail bytes readable). Returns 0 and sets *frame_len
 * when the frame is complete, else: -SAN_PROTO_EVERSION (not a header), -SAN_PROTO_ESEQ (seq
 * in header or trailer is not expected_seq: not written yet, or a stale lap),
 * -SAN_PROTO_EOVERSIZE (declared length above max_len), -SAN_PROTO_ETRUNC (frame runs past
 * avail), -SAN_PROTO_EHASH (torn or corrupt). A complete frame still goes through
 * san_msg_decode() for the per-type rules.
 */
int san_frame_check(const void *buf, size_t avail, uint32_t expected_seq, uint32_t max_len,
		    size_t *frame_len);

/*
 * The same without the hash, for a frame this reader has checked whole before (its header and
 * trailer are still judged: they bound what is read).
 */
int san_frame_check_known(const void *buf, size_t avail, uint32_t expected_seq, uint32_t max_len,
			  size_t *frame_len);

/*
 * san_frame_check, for a reader that takes frames sealed without a hash (SAN_CAP_UNHASHED): a
 * trailer hash of 0 is not checked, any other must match.
 */
int san_frame_check_unhashed_ok(const void *buf, size_t avail, uint32_t expected_seq,
				uint32_t max_len, size_t *frame_len);

#endif /* SAN_FRAME_H */
