/* core — a wait that watches switched connections' rings itself (san_rxwatch.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/san_engine.h"
#include "core/san_epshadow.h"
#include "core/san_ev.h"
#include "core/san_lite.h"
#include "core/san_log.h"
#include "core/san_rxwatch.h"
#include "core/san_sock.h"
#include "core/san_tick.h"
#include "proto/san_wire.h"

int san_rxwatch_nquiet; /* socks with rx_quiet set in this process (never fewer) */

/*
 * Another process holds the connection too (a fork shared it, docs/engine.md §7.1): its flag and
 * rx_quiet are in the shared slot, but the quiet count, the tick and the list an announce walks
 * are each process's, so a connection left quiet here would never be armed for the other's waits
 * (nor, once this process closes its copy, leave this process's count). It keeps the kernel's path.
 */
static bool shared_by_fork(const struct san_sock *s)
{
	return __atomic_load_n(&s->holders, __ATOMIC_ACQUIRE) > 1;
}

/*
 * Switched both ways on shm, held by this process alone and never changed in an epoll set while
 * another held it (san_rxwatch_epoll_ctl), nothing pending that the kernel's path must report.
 * Lock held.
 */
static bool watchable_as(const struct san_sock *s, bool edge)
{
	return !shared_by_fork(s) && !__atomic_load_n(&s->ep_ctl_shared, __ATOMIC_RELAXED) &&
	       s->swapped && s->rx == SK_RX_SAN && s->rxr.sh && s->prov &&
	       s->prov->wire == SAN_PROV_SHM && (!s->want_edges || s->et_watch || edge) &&
	       !s->err && !s->peer_fin && !s->anchor_dead && !s->rd_shut && !s->proc->orphan &&
	       !s->proc->closing && !s->direct_out && !s->rxr.err;
}

/* ... as it stands: one that asks for a doorbell per commit, only once an edge watch took it */
static bool watchable(const struct san_sock *s)
{
	return watchable_as(s, false);
}

/*
 * The peer's doorbell per commit (cons_edges) down while an edge-triggered registration's ring
 * is watched or quiet, and up again. Up is seq_cst, and a look at the ring follows it: a
 * commit the look misses sees the request (the producer publishes, then looks; Dekker).
 * Lock held.
 */
static void edges_down(struct san_sock *s)
{
	if (s->want_edges && !s->edges_off && s->rxr.sh) {
		s->edges_off = true;
		san_shm_ring_cons_edges(&s->rxr, false);
	}
}

void san_rxwatch_edges_up(struct san_sock *s)
{
	if (s->edges_off) {
		s->edges_off = false;
		if (s->rxr.sh)
			san_shm_ring_cons_edges(&s->rxr, true);
		atomic_thread_fence(memory_order_seq_cst);
	}
}

static uint64_t prod_now(const struct san_rxwatch *w)
{
	return atomic_load_explicit((_Atomic uint64_t *)w->prod, memory_order_acquire);
}

/* An edge's look: the ring moved past where it was last reported, and holds something. Lock held. */
static bool edge_ready(struct san_rxwatch *w)
{
	w->at = prod_now(w);
	return w->at != w->s->edge_seen && san_conn_rx_ready(w->s);
}

/* epoll_ctl calls of managed fds so far (san_rxwatch_epoll_ctl): a watch's look at the sets is
 * current while this has not moved. */
static uint32_t ctl_gen;

uint32_t san_rxwatch_ctl_gen(void)
{
	return __atomic_load_n(&ctl_gen, __ATOMIC_SEQ_CST);
}

bool san_rxwatch_begin(struct san_rxwatch *w, int fd, bool edge, uint32_t gen, bool may_sleep,
		       bool *ready)
{
	struct san_sock *s;
	bool ok;

	/*
	 * A lite candidate is on TCP: nothing to watch, and no sock to make (that would leave it
	 * on TCP if another thread's call is inside its gate).
	 */
	if (san_lite_of(fd) || !(s = san_sock_get(fd)))
		return false;
	san_sock_lock(s);
	/*
	 * An edge-triggered registration the caller found to be the fd's only one, in sets no
	 * epoll_ctl has changed since it looked (one that did may have added another: its
	 * san_rxwatch_epoll_ctl, after this, ends the watch's hold), of a connection that never
	 * had a second number. (One the sock did not see made would be taken for level-triggered:
	 * not watched.)
	 */
	ok = watchable_as(s, edge) &&
	     (!edge || (s->want_edges && !s->et_never && san_rxwatch_ctl_gen() == gen));
	if (ok && edge && !s->et_watch) {
		s->et_watch = true;
		san_debug("fd %d: its EPOLLET registration is its only one: waits watch its ring, "
			  "no doorbell per arrival meanwhile", fd);
	}
	if (ok) {
		if (may_sleep)
			s->proc->wait_watched = true;
		*w = (struct san_rxwatch){ .s = s, .prod = &s->rxr.sh->prod, .rd = &s->rxr.rd,
					   .edge = edge };
		if (w->edge) {
			/* no doorbell per commit while watched: the ring moving is the edge */
			edges_down(s);
			*ready = edge_ready(w);
		} else {
			*ready = san_conn_rx_ready(s);
		}
		/* down: the peer commits without a doorbell (one it owes is counted, bells_due) */
		if (!*ready)
			san_shm_ring_cons_unarm(&s->rxr);
	}
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		san_sock_put(s);
		return false;
	}
	return true;
}

bool san_rxwatch_ready(struct san_rxwatch *w)
{
	struct san_sock *s = w->s;
	uint64_t p = prod_now(w);
	bool r;

	/* the peer's index against our cursor: equal, nothing new (a frame's bytes come with it) */
	if (p == __atomic_load_n((const uint64_t *)w->rd, __ATOMIC_RELAXED) ||
	    (w->edge && p == __atomic_load_n(&s->edge_seen, __ATOMIC_RELAXED)))
		return false;
	san_sock_lock(s);
	r = w->edge ? edge_ready(w) : san_conn_rx_ready(s);
	pthread_mutex_unlock(&s->lock);
	return r;
}

uint32_t san_rxwatch_bells(const struct san_rxwatch *w)
{
	return atomic_load_explicit(&w->s->rxr.sh->bells, memory_order_seq_cst);
}

bool san_rxwatch_edge_rang(const struct san_rxwatch *w)
{
	return w->edge && san_rxwatch_bells(w) != __atomic_load_n(&w->s->bells_told, __ATOMIC_RELAXED);
}

void san_rxwatch_edge_told(const struct san_rxwatch *w, const uint32_t *bells)
{
	struct san_sock *s = w->s;

	san_sock_lock(s);
	if (bells)
		__atomic_store_n(&s->bells_told, *bells, __ATOMIC_RELAXED);
	/*
	 * Where its look found it (a report from the kernel: where the last look before it
	 * was; anything after that is reported again, at worst once too often).
	 */
	if (s->et_watch)
		s->edge_seen = w->at;
	pthread_mutex_unlock(&s->lock);
}

/*
 * Quiet connections are announced by the progress thread too, every QUIET_TICK while there
 * are any: a wait the preload cannot see (a raw system call, a thread already asleep in
 * poll when another's receive left the flag down, or took down a flag that nobody in
 * particular had put up: san_rxwatch_defer) learns of their data within that time.
 * A process whose waits all sleep has none left after its last wait, and the tick stops.
 */
#define QUIET_TICK 0.001

static void announce(uint32_t before);
/* (its number: s->quiet_at says when a connection went quiet) */
static struct san_tick tick = SAN_TICK_INIT(QUIET_TICK, &san_rxwatch_nquiet, announce);

/* Left down, nobody watching: quiet until an arm, an announce, or the tick. Lock held. */
static void quiet_begin(struct san_sock *s)
{
	if (shared_by_fork(s)) {
		/* a fork came while a wait watched it: armed, as a connection that is not watched */
		(void)san_conn_rx_arm(s);
		return;
	}
	s->quiet_at = san_tick_now(&tick);
	if (!s->rx_quiet) {
		s->rx_quiet = true;
		/* seq_cst: the count before the tick's `on` (san_tick.h) */
		__atomic_add_fetch(&san_rxwatch_nquiet, 1, __ATOMIC_SEQ_CST);
	}
	if (!san_tick_want(&tick))
		(void)san_conn_rx_arm(s); /* no progress thread: not left quiet, the flag up now */
}

bool san_rxwatch_defer(struct san_sock *s)
{
	if (!watchable(s))
		return false;
	/*
	 * Its flag up, or doorbells owed for it. Put up by this thread's own wait that watched the
	 * ring (over, since this thread reads), or for no wait known (the switch's first arm, a
	 * read's, the tick's): flag down and the owed doorbells off X, so X does not stay readable
	 * over an empty ring. Arming again instead, as until 2026-12-02, kept the flag up for good
	 * once a wait had slept: the peer rang, and the read drained, once for every message of a
	 * ping-pong whose spins caught every reply (sockperf: a sendto and a recvmmsg per message
	 * at each end). Put up by another thread's wait (asleep in the kernel perhaps), or by a
	 * wait that sleeps without watching the ring (poll's, select's: SAN_RX_ARMER_SLEEPER), or
	 * with no spin to catch the next frame (SANSWITCH_SPIN_US=0): armed again by the read,
	 * for the same waiter, as before. A sleeper is then rung at once and not a tick later,
	 * and poll's next call finds no quiet connection to arm.
	 */
	if (s->rxr.armed || s->rxr.bells_due) {
		uintptr_t who = s->proc->rx_armer;

		if ((who != 0 && who != (uintptr_t)pthread_self()) || !san_sock_spin_us() ||
		    !san_conn_rx_unarm(s))
			return false;
	}
	quiet_begin(s);
	return true;
}

/*
 * Until 2026-12-02 such a receive armed: an event loop that reads until EAGAIN at every message
 * (mio/tokio's readiness model, t_spin_eagain's server; memcached and nginx turned out not to)
 * made its peer ring whenever its send landed before the loop's next epoll_wait had taken the
 * flag down again to watch the ring. A wait the preload cannot see (a raw system call, a
 * poll of another thread) learns of the next frame by the tick, as after a read that emptied
 * the ring.
 */
bool san_rxwatch_defer_empty(struct san_sock *s)
{
	return s->proc->wait_watched && san_rxwatch_defer(s);
}

void san_rxwatch_atfork_child(void)
{
	san_tick_atfork_child(&tick);
	/* none was quiet when the fork came (san_rxwatch_unquiet): none is now */
	__atomic_store_n(&san_rxwatch_nquiet, 0, __ATOMIC_RELAXED);
}

void san_rxwatch_epoll_ctl(int fd, int op)
{
	struct san_sock *s;

	/* (before the look below: a watch that looked at the sets before this call refuses) */
	__atomic_add_fetch(&ctl_gen, 1, __ATOMIC_SEQ_CST);
	/* (a lite candidate is on TCP, and must not be made a sock here: san_rxwatch_begin) */
	if (san_lite_of(fd) || !(s = san_sock_get(fd)))
		return;
	if (op != EPOLL_CTL_ADD && shared_by_fork(s))
		__atomic_store_n(&s->ep_ctl_shared, true, __ATOMIC_RELAXED);
	san_sock_lock(s);
	/* (a MOD re-arms an edge-triggered registration: reported if readable, as the kernel's) */
	s->edge_seen = UINT64_MAX;
	s->proc->wait_watched = false; /* (a DEL: its waits may not be ours any more) */
	if (s->et_watch) {
		/*
		 * Its registrations changed: perhaps no longer its only one (another set, which
		 * a wait asleep in the kernel may rely on). Its doorbell per commit is up again
		 * until a watch finds it alone once more. Armed: X rung if data waits, which a
		 * kernel ADD to another set then reports, as TCP's would (no doorbell may have
		 * rung for it).
		 */
		if (s->rxr.sh)
			(void)san_conn_rx_arm(s);
		san_rxwatch_edges_up(s);
		s->et_watch = false;
	}
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
}

void san_rxwatch_unquiet(struct san_sock *s)
{
	if (s->rx_quiet && s->rxr.sh)
		(void)san_conn_rx_arm(s); /* (ends its quiet) */
	san_rxwatch_quiet_end(s);
}

void san_rxwatch_quiet_end(struct san_sock *s)
{
	san_rxwatch_edges_up(s); /* (down only while watched or quiet) */
	if (s->rx_quiet) {
		s->rx_quiet = false;
		if (__atomic_load_n(&san_rxwatch_nquiet, __ATOMIC_RELAXED) > 0)
			__atomic_sub_fetch(&san_rxwatch_nquiet, 1, __ATOMIC_RELAXED);
	}
}

bool san_rxwatch_arm(struct san_rxwatch *w)
{
	struct san_sock *s = w->s;
	bool data;

	san_sock_lock(s);
	if (w->edge) {
		/*
		 * The doorbell per commit back up, then a look: a commit after it rings, one
		 * before it is found here (an edge found is reported, and stays quiet). The
		 * flag stays down: the doorbell per commit does its work.
		 */
		san_rxwatch_edges_up(s);
		if (s->err || s->peer_fin || s->anchor_dead)
			data = true;
		else if ((data = edge_ready(w)) && s->et_watch)
			edges_down(s); /* (not if an epoll_ctl ended the hold meanwhile) */
		else
			san_rxwatch_quiet_end(s);
	} else {
		data = san_conn_rx_arm_quiet(s) != 0;
	}
	pthread_mutex_unlock(&s->lock);
	w->up = !data;
	return data;
}

void san_rxwatch_end(struct san_rxwatch *w, bool reported)
{
	struct san_sock *s = w->s;

	if (!s)
		return;
	/*
	 * Still down (reported, or the wait found something elsewhere): quiet, not armed now. Its
	 * next wait through the preload watches it again, and the peer, whose next frame is
	 * likely to come before the flag would matter, is not made to ring for it.
	 */
	if (!w->up) {
		san_sock_lock(s);
		if (!s->rxr.armed && s->rxr.sh)
			quiet_begin(s);
		/* (edges down only while watched or quiet) */
		if (!s->rx_quiet)
			san_rxwatch_edges_up(s);
		pthread_mutex_unlock(&s->lock);
	}
	san_sock_put(s);
	w->s = NULL;
}

/* Quiet since before tick `before` (all quiet ones: UINT32_MAX). Lock held. */
static bool quiet_before(const struct san_sock *s, uint32_t before)
{
	return s->rx_quiet && (before == UINT32_MAX || (int32_t)(s->quiet_at - before) < 0);
}

/*
 * Unlocked: a connection in use goes quiet at each message, and the tick (every millisecond of
 * a busy process) took every connection's lock and reference to find that out, against the
 * application's threads (wrk's two: about 600 futex waits a second on the locks the tick held).
 * A connection this look misses went quiet since: the next tick sees it (the count is up).
 */
static bool quiet_before_unlocked(const struct san_sock *s, void *arg)
{
	uint32_t before = *(const uint32_t *)arg;

	return __atomic_load_n(&s->rx_quiet, __ATOMIC_ACQUIRE) &&
	       (before == UINT32_MAX ||
		(int32_t)(__atomic_load_n(&s->quiet_at, __ATOMIC_RELAXED) - before) < 0);
}

/*
 * Arm the quiet connections that went quiet before tick `before` (all: UINT32_MAX). The tick
 * leaves those its last period saw go quiet: a connection in use goes quiet again at every
 * message, and arming it would only make its peer ring for the next one.
 */
static void announce(uint32_t before)
{
	struct san_sock **v;
	int n;

	/*
	 * The count is not zeroed and recounted here: a wait of another thread that read it
	 * between the two would take a quiet connection for none, and a poll(fd, 0) would say
	 * "not readable" over data (t_epoll_sets' zero_misses). Each connection's end of quiet
	 * takes itself off (san_rxwatch_quiet_end).
	 */
	n = san_sock_all(&v, quiet_before_unlocked, &before);
	for (int i = 0; i < n; i++) {
		struct san_sock *s = v[i];

		san_sock_lock(s);
		if (quiet_before(s, before)) {
			/* arm: the flag up if the application read the ring empty, else X rung */
			if (s->rxr.sh && before == UINT32_MAX)
				(void)san_conn_rx_arm_sleeper(s);
			else if (s->rxr.sh && san_conn_rx_arm_tick(s) == 1)
				/*
				 * Its data waited a tick with no wait of ours to find it: one we
				 * cannot see may sleep on X (a raw system call), so its nonblocking
				 * reads arm again (san_rxwatch_defer_empty) until one of our waits
				 * that may sleep watches it once more: a tick late once, not at
				 * every message.
				 */
				s->proc->wait_watched = false;
			san_rxwatch_quiet_end(s);
		}
		pthread_mutex_unlock(&s->lock);
		san_sock_put(s);
	}
	free(v);
}

void san_rxwatch_announce(void)
{
	announce(UINT32_MAX);
}

bool san_rxwatch_peer_here(const struct san_rxwatch *w, int cpu)
{
	return cpu >= 0 && san_shm_ring_cons_peer_cpu(&w->s->rxr) == (uint32_t)cpu + 1;
}
