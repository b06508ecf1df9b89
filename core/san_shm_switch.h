/* core — shm: the switch-over word, one per direction (the no-pause switch, protocol.md §16). */
#ifndef SAN_SHM_SWITCH_H
#define SAN_SHM_SWITCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/san_shm_ring.h"

/*
 * Once both ends have mapped a connection's rings (PREPARED), each direction switches alone:
 * its sender picks the offset X (its TCP bytes so far), and its reader must never receive
 * past X over TCP without knowing X, or the MARK that follows X would reach the application
 * as data. Instead of pausing the reader for a round trip, the two agree through one 64-bit
 * word in the header of that direction's ring, which both map:
 *
 *   OPEN          nobody is inside; the sender may commit
 *   READING       the reader is inside a TCP receive (nonblocking: microseconds)
 *   WITHDRAWN     the reader let go of the preparation (a fork, a splice from the socket):
 *                 this direction stays on TCP
 *   COMMITTED|X   the sender committed at X: its bytes from X on go by the ring, and 16
 *                 bytes of MARK follow byte X on TCP
 *
 * Every change is a compare-and-swap from the state the changer expects, so exactly one of
 * "the reader enters" and "the sender commits" happens first: a receive held under READING
 * cannot return a MARK byte (the MARK is written only after a commit, which READING keeps
 * out), and a receive that begins after the commit finds X in the word and stops there.
 *
 * The word lives in memory the peer can write. A value no state has, or a word that changes
 * under the reader's READING, is -EPROTO; an X the reader has already read past is the
 * caller's check (it knows its TCP counts). Neither can make us read or write outside the
 * word: the worst a lying peer does is reset its own connection, or keep it on TCP.
 */

#define SAN_SHM_SW_OPEN 0ull
#define SAN_SHM_SW_READING (1ull << 63)
#define SAN_SHM_SW_WITHDRAWN ((1ull << 63) | 1)
#define SAN_SHM_SW_COMMITTED (1ull << 62)
#define SAN_SHM_SW_X_MAX (SAN_SHM_SW_COMMITTED - 1)

/*
 * The reader, before a TCP receive: 0 (held: receive, then san_shm_sw_read_end), 1 (the
 * sender committed: *x is its X, receive only up to it), -ECANCELED (we withdrew: stay on
 * TCP), -EPROTO (a value no state has, READING included: we are the only reader).
 */
int san_shm_sw_read_begin(struct san_shm_ring_shared *sh, uint64_t *x);

/* The reader, after that receive: 0, or -EPROTO (the word changed while we held it). */
int san_shm_sw_read_end(struct san_shm_ring_shared *sh);

/*
 * Has the sender committed? true with *x its X. A look only (the reader need not hold the word
 * to learn a commit, which is final): for a reader that is not receiving.
 */
bool san_shm_sw_committed(struct san_shm_ring_shared *sh, uint64_t *x);

/*
 * The reader lets go of the preparation: 0 (withdrawn: the sender will not commit), 1 (too
 * late: committed at *x, which the reader must honour), -EPROTO.
 */
int san_shm_sw_withdraw(struct san_shm_ring_shared *sh, uint64_t *x);

/*
 * The sender commits at x, trying up to tries times while the reader is inside a receive:
 * 0 (committed: the ring, then the MARK), -EBUSY (the reader is still inside: send on TCP
 * and try again at a later send), -ECANCELED (withdrawn: stay on TCP), -EALREADY
 * (committed before), -EINVAL (x above SAN_SHM_SW_X_MAX), -EPROTO.
 */
int san_shm_sw_commit(struct san_shm_ring_shared *sh, uint64_t x, unsigned int tries);

#endif /* SAN_SHM_SWITCH_H */
