/* core — the shm provider: processes of one host, over a shared memfd mapping. */
#include <sys/socket.h>

#include "core/san_log.h"
#include "core/san_prov.h"
#include "core/san_sock.h"
#include "core/san_stats.h"
#include "core/san_sys.h"
#include "proto/san_wire.h"

/*
 * On shm the peer is a process of this host and both map the connection's memfd: the rings
 * and the bulk areas are shared memory, the peer's notification socket pair is shared too (we
 * hold its Y), and the side channel is an AF_UNIX abstract socket (core/san_up.c,
 * core/san_sidechan.c; protocol.md "Side channel and ownership proof (shm)", "shm provider").
 */

/*
 * A zero-length message on the peer's Y makes its X readable; a peer that is gone costs nothing.
 * Counted first (san_shm_ring_prod_bell), so that the peer's consumer knows how many wait on its
 * X and takes them off before X's queue is full. A full queue (EAGAIN) is not waited out: X is
 * readable already, and the peer drains at its next look, which the doorbells that filled the
 * queue, all rung since its last look, wake it for (docs/protocol.md "A bounded doorbell
 * queue").
 */
static void shm_ring_peer(struct san_sock *s)
{
	if (s->ypeer < 0)
		return;
	if (s->txr.sh)
		san_shm_ring_prod_bell(&s->txr);
	san_stats_add(SAN_STAT_SHM_BELLS, 1);
	if (san_sys_send(s->ypeer, "", 0, MSG_DONTWAIT | MSG_NOSIGNAL) == -EAGAIN)
		san_debug("fd %d: the peer's doorbell queue is full (it has not looked since)",
			  s->fd);
}

/* The peer plugged its X when it found no room: taking the plugs off its Y wakes it. */
static void shm_wake_producer(struct san_sock *s)
{
	if (s->ypeer >= 0)
		san_sock_unplug(s->ypeer);
}

/* The peer's area is mapped here too: a copy, straight into the caller's buffer. */
static int shm_bulk_copy(struct san_sock *s, bool read, bool peek, uint64_t off, uint64_t end,
			 const struct iovec *iov, int iovcnt, size_t at, size_t n)
{
	(void)read;
	(void)peek;
	(void)end;
	san_conn_iov_copy(iov, iovcnt, at, s->bulk_rx + off, n, true);
	return 0;
}

/*
 * A region of our area is the peer's until its consumer passes the frame that announced it
 * (SRC_AVAIL or WRITE_DONE): the ring position just past that frame is the region's key.
 */
static uint64_t shm_area_key(struct san_sock *s)
{
	return s->txr.prod;
}

/* The peer's consumer index of our outbound ring: its application's reads (shared memory). */
static int shm_cons_released(struct san_sock *s, uint64_t *pos)
{
	return san_shm_ring_prod_released(&s->txr, pos);
}

static int shm_cons_arm(struct san_sock *s, uint64_t pos)
{
	return san_shm_ring_prod_arm_cons(&s->txr, pos);
}

static int shm_area_arm(struct san_sock *s)
{
	return shm_cons_arm(s, san_stage_oldest(&s->stage));
}

const struct san_prov_ops san_prov_shm = {
	.name = "shm",
	.wire = SAN_PROV_SHM,
	.listen = san_up_listen,
	.unlisten = san_up_unlisten,
	.atfork_child = san_up_atfork_child,
	.propose = san_up_a_run,
	.ring_peer = shm_ring_peer,
	.wake_producer = shm_wake_producer,
	.bulk_copy = shm_bulk_copy,
	.area_key = shm_area_key,
	.area_released = shm_cons_released,
	.area_arm = shm_area_arm,
	.peer_read_to = shm_cons_released,
	.peer_read_arm = shm_cons_arm,
	.peer_reads_seen = true,
	.shared_by_fork = true,
};
