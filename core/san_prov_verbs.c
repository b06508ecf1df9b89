/* core — the verbs provider: switched connections over RDMA (rdma-core), docs/verbs.md. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/san_config.h"
#include "core/san_core.h"
#include "core/san_engine.h"
#include "core/san_ev.h"
#include "core/san_fdtable.h"
#include "core/san_log.h"
#include "core/san_memhook.h"
#include "core/san_owner.h"
#include "core/san_prov.h"
#include "core/san_regcache.h"
#include "core/san_sig.h"
#include "core/san_sock.h"
#include "core/san_stage.h"
#include "core/san_stats.h"
#include "core/san_stats_conn.h"
#include "core/san_sys.h"
#include "core/san_verbs.h"
#include "core/san_vredir.h"
#include "proto/san_frame.h"
#include "proto/san_ahead.h"
#include "proto/san_msg.h"
#include "proto/san_upgrade.h"
#include "proto/san_rcvwin.h"
#include "proto/san_window.h"
#include "proto/san_wire.h"

/*
 * The engine above (rings of sealed frames, readiness through X, the session messages) is the
 * one shm uses; here the rings are private to this process and RC SENDs carry the frames
 * between the two processes' rings (docs/verbs.md §1):
 *
 *   application send -> txr --pump: SEND per frame--> peer's QP --on_msg: copy--> peer's rxr
 *
 * The pump runs wherever a frame was committed (the application's thread, in ring_peer) and on
 * the engine thread when completions or credits free room. The engine thread takes the
 * receives (on_msg) and copies them into rxr, ringing our own X; a receive that finds rxr full
 * is held in its slot (its credit withheld, so the peer's sender stops) until the application
 * releases room (wake_producer, which refills). Every function here runs with the sock's lock.
 *
 * Trust: across hosts the proof of ownership of protocol.md §9.3 does not exist; the fabric is
 * trusted as WSD, SDP and rsockets trust it, and the MARKs still prove that the peer holds the
 * TCP connection's other end (docs/verbs.md §2).
 */

#define V_RING (256u * 1024u)		      /* data bytes of each private ring */
#define V_MAX_MSG (16u * 1024u + SAN_HDR_LEN) /* largest frame: a 16 KiB DATA payload */
#define V_NRECV 64			      /* receive slots (credits we give) */
#define V_THRESHOLD 16
#define V_NSEND 32
#define V_CONNECT_MS 3000  /* A: address, route and the peer's answer, in all (our own set-up
			    * does not count: it took over 1 s under emulation on a busy host; a
			    * peer without a listener rejects at once, so this bounds only an
			    * unanswered connect) */
#define V_SWITCH_MS 5000   /* A: B's SWITCH after ours */
#define V_SWITCH_S 5.0	   /* B: ESTABLISHED and A's SWITCH after its accept */
#define V_LINGER_S 2.0	   /* a listener outlives its TCP listener (as shm's side channel) */
#define V_B_TRIES 100	   /* x 5 ms: a PROPOSE that came before the application's accept() */
#define V_B_FORK_TRIES 400 /* ... in a process that forked: until a worker or child names it
			    * (san_vredir.h), within A's V_CONNECT_MS */
#define V_END_S 2.0	   /* a reset connection's ABORT has this long to go out */
#define V_MIB (1u << 20)
#define V_BULK V_MIB	   /* bulk area per direction (our regions; our mirror of the peer's)
			    * at the least: sized at set-up, 1..SAN_CFG_VERBS_AREA_MAX MiB */
#define V_REGION (V_BULK / 4) /* a transfer's region at most, whatever the area */
#define V_AREA_BUDGET (256ull << 20) /* what the areas beyond V_BULK may pin, in all */
#define V_READ_MAX_S 60	   /* a synchronous RDMA READ that long without completing: reset */
#define V_WRITE_TAG (1ull << 62) /* the cookie of an RDMA WRITE (a READ's is its sequence) */
#define V_KILL_WAIT_S 5	   /* a READ given up on: its flushed completion comes within this */
#define V_DIRECT_MIN (32u * 1024u) /* a READ straight into the application's buffer: at least */
#define V_RC_ENTRIES 64		   /* registrations of application buffers per connection */
#define V_RC_BYTES (64ull << 20)   /* ... and the bytes they may pin, at most */
#define V_MISS_STREAK 8		   /* misses in a row: fresh buffers, stop registering ... */
#define V_MISS_PAUSE 64		   /* ... for this many reads (then try again) */
#define V_AHEAD_MAX SAN_CFG_READ_AHEAD_MAX /* READs posted ahead (SANSWITCH_READ_AHEAD) */

/* The compact PROPOSE, ACCEPT and REJECT in the CM's private data (big-endian fields). */
#define V_PROPOSE_MAGIC 0x53414e50u /* "SANP" */
#define V_ACCEPT_MAGIC 0x53414e41u  /* "SANA" */
/* What a HELLO on verbs may offer (a side whose area cannot be registered offers less). */
#define V_CAPS (SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE)
#define V_REJECT_MAGIC 0x53414e58u  /* "SANX" */

struct v_propose {
	uint32_t magic;
	uint8_t ver_min, ver_max;
	uint16_t caps;
	uint64_t nonce;	       /* what B writes in its MARK */
	uint8_t src[16], dst[16]; /* A's and B's address as A sees them (IPv4-mapped) */
	uint16_t sport, dport;
	uint8_t area_mib; /* the bulk area A proposes, MiB each way (0: an older build's 1) */
	uint8_t rsvd[3];
};
struct v_accept {
	uint32_t magic;
	uint8_t version;
	uint8_t area_mib; /* the area agreed, at most A's proposal (0: an older build's 1) */
	uint8_t rsvd0[2];
	uint32_t caps;
	uint32_t max_msg; /* the largest frame B's receive slots take */
	uint64_t nonce;	  /* what A writes in its MARK */
};
struct v_reject {
	uint32_t magic;
	uint16_t reason; /* enum san_reason */
	uint16_t port;	 /* NOT_OWNER: where the connection is served (0: nowhere known) */
};
_Static_assert(sizeof(struct v_propose) == SAN_VERBS_PDATA_CONNECT &&
		       sizeof(struct v_accept) == 24 && sizeof(struct v_reject) == 8,
	       "verbs private data layout changed: update docs/verbs.md §2");

enum v_stage {
	V_WAIT_SWITCH, /* the peer's SWITCH is the next message (A: after ours; B: before ours) */
	V_RUNNING,     /* frames flow both ways */
};

struct v_held {
	int64_t slot;
	const void *msg;
	uint32_t len;
};

/* One switched (or switching) connection's provider state: s->pv. */
struct vconn {
	struct san_sock *s; /* a reference */
	struct san_verbs_conn *c;
	bool b;			/* we accepted (B) */
	enum v_stage stage;
	bool switch_sent;	/* our SWITCH is out: frames of txr may follow */
	bool in_poll;		/* inside san_verbs_poll: sends wait for its end */
	bool gone;		/* the transport broke or the peer disconnected */
	bool peer_done;		/* the peer's DISCONNECT or ABORT came through */
	bool fail;		/* a message broke the protocol: reset after the poll */
	bool watched;		/* the engine watches it (started on the engine thread) */
	bool ending;		/* reset or closed: finish once the last frames are out */
	ev_tstamp end_by;	/* ... or by then */
	bool rst_held;		/* our reset's RST on the anchor waits for them (v_hold_reset) */
	uint64_t rst_by;	/* ... until then at the latest (san_sock_now_ns) */
	struct san_shm_cons pump; /* our txr, read to send */
	struct san_shm_prod fill; /* our rxr, written from receives */
	void *map;
	size_t map_len;
	int x, y;   /* the notification pair until it is handed to the sock */
	int anchor; /* our dup of the TCP socket: no FIN before our last frame has gone */
	int kick;   /* eventfd: another thread asks the engine to look (closed, reset) */
	ev_io cq_w, cm_w, kick_w;
	ev_timer t; /* B: A's SWITCH must come; then: the MARK's rest; an ending's limit */
	/*
	 * Our MARK (protocol.md §9.2, rule 3): due from our commit, it goes once our first stream
	 * bytes or our end are in txr (mark_at: txr's bytes then) AND acknowledged by the peer's
	 * HCA: posted as SENDs up to mark_sends, completed up to there (mark_try). A reader woken
	 * by it then finds them in its CQ, at the latest.
	 */
	bool mark_armed;     /* mark_at is set */
	bool mark_posted;    /* ... txr was sent past it: mark_sends is set */
	bool mark_wait;	     /* TCP's send buffer had no room for it: the timer writes the rest */
	uint64_t mark_at, mark_sends;
	bool peer_stream;    /* a frame of the peer's stream is in rxr: DATA, DISCONNECT, ABORT */
	bool peer_marks_late; /* its MARK follows its delivered bytes (SAN_CAP_MARK_DELIVERED) */
	uint32_t nheld, hhead;
	struct v_held held[V_NRECV];
	struct vconn *run_prev, *run_next; /* on the spinners' list while running */
	bool on_run;
	/*
	 * Who takes the completions (docs/verbs.md §3, "Who polls"): an application thread whose
	 * spin last took a message from the CQ at app_ns (san_sock_now_ns) owns it, and the
	 * engine leaves it unarmed (no channel event, no engine wake-up per completion) while it
	 * does; v_arm_t, the engine's tick, looks at the ones it left so.
	 */
	_Atomic bool unarmed;
	_Atomic uint64_t app_ns;
	uint32_t rx_msgs; /* messages received (on_msg), for a spin to see it took one */
	/* ---- bulk (docs/verbs.md §4) ---- */
	size_t bulk;		      /* bytes per direction of the area, as agreed at set-up */
	struct san_verbs_region area; /* [bulk_tx, bulk_tx + 2 bulk): ours, then the mirror */
	uint64_t fetch_lo, fetch_hi;  /* mirror bytes read from the peer (the open transfer's) */
	uint64_t rd_seq, rd_done;     /* our last READ's cookie, the last one completed */
	bool rd_failed;		      /* a READ completed with an error (the QP is broken) */
	bool rdma_full;		      /* a WRITE found every RDMA slot busy */
	uint64_t tx_seq, rel_seq;     /* our transfers announced, and released (READ_DONE), so
				       * far: 64-bit, where the wire's ids wrap at 2^32 */
	uint32_t done_ids[SAN_STAGE_RECS]; /* READ_DONEs we owe the peer, oldest first */
	uint32_t ndone, done_head;
	uint32_t bulk_open; /* the peer's bulk transfers in rxr, not yet delivered in full */
	/*
	 * Transfers to READ ahead, in transfer order (docs/verbs.md §4): room for every transfer
	 * the sender may have open (its stage's records), so that none is left out while a later
	 * one is queued; how many are READ at once is the depth's (ahead_room).
	 */
	struct v_ahead {
		uint64_t lo, hi; /* the transfer's rest, in the mirror */
		uint64_t cookie; /* posted: done once rd_done >= cookie */
		uint32_t id;
		bool posted;	 /* its READ is out (else it waits for the depth to allow it) */
		bool reached;	 /* the application has come to it */
		bool used;	 /* a receive copied from it (counted) */
	} ahead[SAN_STAGE_RECS];
	uint32_t nahead;
	struct san_ahead ra; /* how many READs ahead may be out (SANSWITCH_READ_AHEAD=auto) */
	/* ---- READ into the application's buffer (docs/verbs-registration.md) ---- */
	struct san_regcache *rc;	/* made at the first such READ; NULL before (or if not) */
	bool rc_off;			/* no cache could be made: always the mirror */
	uint64_t rc_hits, rc_misses;	/* the cache's counts, as last added to the stats */
	uint32_t miss_streak, pause;	/* lookups that missed in a row; reads left to skip */
	/* ---- socket buffer sizes (docs/verbs.md §1, "Socket buffer sizes") ---- */
	bool win_cap;		   /* the peer reads RCV_WINDOW (its PROPOSE or ACCEPT said so) */
	bool win_heard;		   /* its first RCV_WINDOW came */
	bool read_armed;	   /* a send waits for the peer's reads (read_want) */
	struct san_rcvwin_rx win_rx; /* rxr: delivered, read, told */
	struct san_rcvwin_tx win_tx; /* txr: sent, read by the peer */
	uint64_t read_want; /* ... until the peer has read up to this txr position */
};

/*
 * Running connections, for waits that spin (san_prov_verbs_spin): a waiting application thread
 * polls their CQs itself, which saves the two thread wake-ups a message otherwise costs (the
 * engine thread's, then the application's). Protected by run_lock; a connection leaves the list
 * (v_end) before it is freed, so a spinner holding run_lock may touch it.
 */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vconn *running;
static _Atomic int nrunning;

/*
 * Application threads asleep in a wait (san_prov_verbs_sleep): while one is, the engine arms
 * every CQ it drains, as the sleeper may wait for what the next completion brings. And the
 * connections whose CQ the engine left unarmed, for the sleepers to arm first.
 */
static _Atomic int v_sleepers __attribute__((aligned(64))); /* (every wait's: a line of its own) */
static _Atomic int v_nunarmed __attribute__((aligned(64)));
/*
 * The engine's tick while a CQ is left unarmed (one for the process, not one per connection: a
 * busy server may own hundreds): kicks each such connection whose owner stopped spinning, for
 * the engine to arm its CQ. Engine thread only; set up at first use, again after a fork.
 */
static ev_timer v_arm_t;
static struct ev_loop *v_arm_loop; /* the loop it was set up for (none after a fork) */

static void v_exit_flush(void);
static _Atomic pid_t run_pid; /* the process whose connections are on the list */
/*
 * Registered at load, before the program's own handlers: atexit runs them in reverse, so ours
 * runs after every handler the program registers (C++ destructors included), when the program
 * has written its last bytes (but for stdio, flushed in v_exit_flush itself).
 */
__attribute__((constructor)) static void v_exit_register(void)
{
	if (atexit(v_exit_flush))
		san_warn("verbs: atexit failed: frames still queued at exit may be lost");
}
static atomic_uint_fast64_t frames_sent; /* for the exit flush: is anything still moving? */

static void run_add(struct vconn *v)
{
	pthread_mutex_lock(&run_lock);
	if (!v->on_run) {
		v->run_prev = NULL;
		v->run_next = running;
		if (running)
			running->run_prev = v;
		running = v;
		v->on_run = true;
		atomic_fetch_add(&nrunning, 1);
		atomic_store(&run_pid, getpid());
	}
	pthread_mutex_unlock(&run_lock);
}

static void run_del(struct vconn *v)
{
	pthread_mutex_lock(&run_lock);
	if (v->on_run) {
		if (v->run_prev)
			v->run_prev->run_next = v->run_next;
		else
			running = v->run_next;
		if (v->run_next)
			v->run_next->run_prev = v->run_prev;
		v->on_run = false;
		atomic_fetch_sub(&nrunning, 1);
	}
	pthread_mutex_unlock(&run_lock);
}

/*
 * The bulk area per connection (docs/verbs.md §4, "Window"). A region is the sender's from its
 * SRC_AVAIL to its READ_DONE, a cycle of two round trips (the SRC_AVAIL one way, the READ's
 * request and answer, the READ_DONE back), so the area bounds a connection at area / (2 RTT):
 * 1 MiB is about 400 Mbit/s at 10 ms. A proposes a size in the PROPOSE (MiB each way), B takes
 * at most that (and at most its own setting), and both use the agreed size each way. By default
 * (SANSWITCH_VERBS_AREA=auto) A proposes 2 x the path's bandwidth-delay product + one region,
 * the product estimated at set-up as the TCP connection's smallest RTT (the kernel's
 * tcpi_min_rtt, same path) times the fastest active RDMA port's rate: 1 MiB on a short link. A
 * software device reports a port rate far above what it carries (rxe says 2.5 Gbit/s), which
 * costs pinned memory, not speed. Beyond the first MiB an area comes out of a process-wide
 * pinning budget (V_AREA_BUDGET, or a quarter of what v_pin_limit allows if that is less); a
 * connection that finds none left gets 1 MiB.
 */
static atomic_uint_fast64_t area_extra; /* bytes the areas beyond V_BULK each way pin, in all */

/*
 * What this process may pin, in bytes: RLIMIT_MEMLOCK, unless it holds CAP_IPC_LOCK in the
 * initial user namespace (then the limit does not apply, on rxe as on hardware: UINT64_MAX).
 * Root without the capability (as under setpriv, or in a rootless container) is limited like
 * anyone else. Found once per process, at its first connection (the budgets below derive from
 * it; a limit raised later is not seen).
 */
static uint64_t pin_limit;

static void pin_limit_find(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
	struct rlimit rl;

	if (!syscall(SYS_capget, &hdr, caps) &&
	    (caps[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32))) && san_owner_init_userns())
		pin_limit = UINT64_MAX;
	else if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		pin_limit = UINT64_MAX;
	else
		pin_limit = rl.rlim_cur;
}

static uint64_t v_pin_limit(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, pin_limit_find);
	return pin_limit;
}

static uint64_t area_budget(void)
{
	uint64_t lim = v_pin_limit();

	return lim / 4 < V_AREA_BUDGET ? lim / 4 : V_AREA_BUDGET;
}

/* Take what an area of mib MiB each way pins beyond the least from the budget: its size, or
 * V_BULK when the budget has no room. */
static size_t area_take(uint32_t mib)
{
	uint64_t extra = 2 * ((uint64_t)mib * V_MIB - V_BULK);

	if (mib <= 1)
		return V_BULK;
	if (atomic_fetch_add(&area_extra, extra) + extra > area_budget()) {
		atomic_fetch_sub(&area_extra, extra);
		return V_BULK;
	}
	return (size_t)mib * V_MIB;
}

static void area_give(size_t bulk)
{
	if (bulk > V_BULK)
		atomic_fetch_sub(&area_extra, 2 * (bulk - V_BULK));
}

/* The area, in MiB each way, that A proposes for a connection on the TCP socket tcp. */
static uint32_t area_want(int tcp, uint64_t *rtt_us, uint64_t *rate)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	*rtt_us = *rate = 0;
	if (san_cfg.verbs_area != SAN_CFG_VERBS_AREA_AUTO)
		return san_cfg.verbs_area;
	memset(&ti, 0, sizeof(ti));
	/* (the system call: our getsockopt would look the fd up again) */
	if (syscall(SYS_getsockopt, tcp, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return 1;
	*rtt_us = len >= offsetof(struct tcp_info, tcpi_min_rtt) + sizeof(ti.tcpi_min_rtt) &&
				  ti.tcpi_min_rtt
			  ? ti.tcpi_min_rtt
			  : ti.tcpi_rtt;
	*rate = san_verbs_port_rate();
	if (!*rtt_us || !*rate)
		return 1;
	return san_window_area_units(*rate, *rtt_us, V_REGION, V_MIB, SAN_CFG_VERBS_AREA_MAX);
}

static const struct san_verbs_params v_params = {
	.nrecv = V_NRECV,
	.threshold = V_THRESHOLD,
	.nsend = V_NSEND,
	.max_msg = V_MAX_MSG,
};

/* No rdma_cm on this host (no device, no module): no listener or connect tries again. */
static int v_absent;

static bool v_absent_op(void)
{
	return v_absent;
}

static bool v_absent_errno(int r)
{
	return r == -ENODEV || r == -ENOENT || r == -ENOSYS || r == -EAFNOSUPPORT;
}

/* ---- the private rings ----------------------------------------------------------------- */

/* Where the bulk area starts in the mapping, after the two rings (page-aligned). */
static size_t v_area_off(void)
{
	return (2 * san_shm_ring_bytes(V_RING) + 4095) & ~(size_t)4095;
}

static void v_timer(struct ev_loop *loop, ev_timer *t, int revents);
static void v_arm_tick(struct ev_loop *loop, ev_timer *t, int revents);

static void v_rc_destroy(struct vconn *v);

static void v_free(struct vconn *v)
{
	v_rc_destroy(v);	   /* (before the close: registrations hold the protection domain) */
	san_verbs_dereg(&v->area); /* (likewise) */
	if (v->c)
		san_verbs_close(v->c);
	if (v->map)
		munmap(v->map, v->map_len);
	if (v->x >= 0)
		san_sys_close(v->x);
	if (v->y >= 0)
		san_sys_close(v->y);
	if (v->kick >= 0)
		san_sys_close(v->kick);
	if (v->anchor >= 0)
		san_sys_close(v->anchor);
	area_give(v->bulk);
	free(v);
}

/*
 * Two rings in anonymous memory (ring 0: our frames out, ring 1: the peer's in), room for a
 * bulk area of bulk bytes per direction (already counted in the budget: v_free gives it back),
 * the handles the provider keeps on the rings' far ends, and the notification pair. NULL if
 * memory is short.
 */
static struct vconn *v_new(size_t bulk)
{
	size_t one = san_shm_ring_bytes(V_RING);
	struct vconn *v = calloc(1, sizeof(*v));
	uint8_t *base;

	if (!v) {
		area_give(bulk);
		return NULL;
	}
	v->x = v->y = v->kick = v->anchor = -1;
	v->bulk = bulk;
	v->map_len = v_area_off() + 2 * bulk; /* the bulk area: registered at commit */
	base = mmap(NULL, v->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		area_give(bulk);
		free(v);
		return NULL;
	}
	v->map = base;
	if (san_shm_ring_init(base, one, V_RING) < 0 || san_shm_ring_init(base + one, one, V_RING) < 0 ||
	    san_shm_ring_cons_attach(&v->pump, base, one, V_MAX_MSG) < 0 ||
	    san_shm_ring_prod_attach(&v->fill, base + one, one, V_MAX_MSG) < 0 ||
	    san_up_pair(&v->x, &v->y) < 0) {
		v_free(v);
		return NULL;
	}
	v->kick = san_fd_hide(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (v->kick < 0) {
		v_free(v);
		return NULL;
	}
	ev_init(&v->t, v_timer);
	v->t.data = v;
	san_ahead_init(&v->ra, V_AHEAD_MAX);
	/* every commit of the application's is a frame to send: no sleeping consumer to ring */
	san_shm_ring_cons_edges(&v->pump, true);
	/* this process writes and reads both rings: frames without XXH64 (protocol.md §6) */
	v->pump.unhashed_ok = true;
	v->fill.unhashed = true;
	return v;
}

/* Hand the rings and the pair to s (lock held); s keeps them (sock_free unmaps, closes). */
static int v_attach(struct vconn *v, struct san_sock *s)
{
	size_t one = san_shm_ring_bytes(V_RING);
	int r;

	/*
	 * A sender that never reads keeps the TCP number (no swap), and its close() closes that
	 * socket at once: on shm its frames are already in the shared ring, but here they may still
	 * wait in txr, and the peer believes the anchor's EOF once its CQ is empty. So the TCP
	 * connection stays open, through this dup, until the provider is done (v_end).
	 */
	v->anchor = san_fd_dup_hidden(s->tcp);
	if (v->anchor < 0)
		return v->anchor; /* before the rings: a failure leaves s untouched */
	r = san_shm_ring_prod_attach(&s->txr, v->map, one, V_MAX_MSG);
	if (!r)
		r = san_shm_ring_cons_attach(&s->rxr, (uint8_t *)v->map + one, one, V_MAX_MSG);
	if (r < 0) {
		memset(&s->txr, 0, sizeof(s->txr)); /* the rings go with v: nothing may point there */
		memset(&s->rxr, 0, sizeof(s->rxr));
		return r;
	}
	if (s->want_edges)
		san_shm_ring_cons_edges(&s->rxr, true);
	s->txr.unhashed = true; /* (as the engine's ends, v_new) */
	s->rxr.unhashed_ok = true;
	s->map = v->map;
	s->map_len = v->map_len;
	s->xfd = v->x;
	s->ylocal = v->y;
	v->map = NULL;
	v->x = v->y = -1;
	/* shm's one-copy paths read or write the peer process's memory: not across a fabric */
	s->direct_off = s->src_off = true;
	s->prov = &san_prov_verbs;
	san_stats_conn_set(s->proc->stc, SAN_CS_UPGRADING, SAN_CONN_KEEP, 0);
	s->pv = v;
	v->s = s;
	san_sock_hold(s);
	return 0;
}

/* ---- frames out ------------------------------------------------------------------------ */

static void v_down(struct vconn *v, int r);

/*
 * A control message of the provider's own, sent beside txr (CTRL class): 0; -EAGAIN (no
 * credit or send slot: a completion or the peer's credits bring us back to pump); -errno
 * with the transport down.
 */
static int send_beside(struct vconn *v, const struct san_msg *m)
{
	uint8_t buf[64];
	int n = san_msg_encode(m, buf, sizeof(buf));
	int r = n < 0 ? n : san_verbs_send_ctrl(v->c, buf, (size_t)n);

	if (r < 0 && r != -EAGAIN)
		v_down(v, r);
	return r;
}

/*
 * The READ_DONEs we owe (v_xfer_done), in order: control messages, sent beside txr rather
 * than through it (the peer's regions must come free even while our own stream waits for
 * credits or ring room). 0, or -errno with the transport down.
 */
static int send_dones(struct vconn *v)
{
	while (v->ndone) {
		struct san_msg m = { .type = SAN_T_READ_DONE };
		int r;

		m.u.read_done.xfer_id = v->done_ids[v->done_head];
		m.u.read_done.status = SAN_XS_OK;
		r = send_beside(v, &m);
		if (r < 0)
			return r == -EAGAIN ? 0 : r;
		v->done_head = (v->done_head + 1) % SAN_STAGE_RECS;
		v->ndone--;
	}
	return 0;
}

/*
 * RCV_WINDOW, when due (san_rcvwin_rx_due; docs/verbs.md §1, "Socket buffer sizes"): our
 * application's receive window (sock_windows writes it into rxr's header) and the frame bytes
 * it has read. While reading what is delivered will make one due, rxr's producer stays armed
 * (the flag alone), so that the application's next release calls wake_producer, which comes
 * back here. Nothing when the peer predates the message, nor on a connection where neither
 * application set a size: the first goes once our SO_RCVBUF or SO_SNDBUF is set, or as the
 * answer to the peer's first (a sender whose SO_SNDBUF is set waits for it). 0, or -errno with
 * the transport down. (win_report: once our SWITCH is out; B's first, in b_commit, goes just
 * before it.)
 */
static int win_tell(struct vconn *v)
{
	uint32_t win = san_shm_ring_peer_window(&v->fill);
	struct san_msg m = { .type = SAN_T_RCV_WINDOW };
	/* our first is wanted: we wait for the peer's (ours asks for it), or it waits for ours */
	bool asked = v->s->snd_window || v->win_heard;
	enum san_rcvwin_due due;
	uint64_t cons;
	int r;

	if (!v->win_cap || (!win && !v->win_rx.win_told && (v->win_rx.said || !asked)) || !v->c ||
	    v->gone || v->s->err || san_shm_ring_prod_released(&v->fill, &cons) < 0)
		return 0; /* (no window, none told, nothing to answer: not even a look at rxr) */
	m.u.rcv_window.window = win;
	m.u.rcv_window.consumed = san_rcvwin_rx_read(&v->win_rx, cons);
	due = san_rcvwin_rx_due(&v->win_rx, win, m.u.rcv_window.consumed, asked);
	if (due == SAN_RCVWIN_TELL) {
		r = send_beside(v, &m);
		if (r < 0)
			return r == -EAGAIN ? 0 : r;
		san_rcvwin_rx_told(&v->win_rx, win, m.u.rcv_window.consumed);
		due = san_rcvwin_rx_due(&v->win_rx, win, m.u.rcv_window.consumed, asked);
	}
	if (due == SAN_RCVWIN_WATCH)
		(void)san_shm_ring_prod_arm_cons(&v->fill, UINT64_MAX);
	return 0;
}

static int win_report(struct vconn *v)
{
	return v->switch_sent ? win_tell(v) : 0;
}
static void mark_try(struct vconn *v);

/* Send what txr holds while credits and send slots last. */
static void pump_frames(struct vconn *v)
{
	struct san_sock *s = v->s;
	struct san_shm_frame f;
	int r;

	if (!v->c || v->gone || !v->switch_sent || v->in_poll)
		return;
	if (send_dones(v) < 0 || win_report(v) < 0)
		return;
	while ((r = san_shm_ring_cons_peek(&v->pump, &f)) == 0) {
		r = san_verbs_send(v->c, f.msg, f.len);
		if (r == -EAGAIN)
			return; /* a completion or the peer's credits bring us back */
		if (r < 0) {
			v_down(v, r);
			return;
		}
		v->win_tx.sent += san_frame_len(f.len);
		atomic_fetch_add_explicit(&frames_sent, 1, memory_order_relaxed);
		r = san_shm_ring_cons_consume(&v->pump);
		if (r == 1 && s->ylocal >= 0)
			san_sock_unplug(s->ylocal); /* our application waits for room */
		if (r < 0)
			break;
	}
	if (r != -EAGAIN) {
		san_warn("fd %d: verbs: outbound ring: %s", s->fd, v->pump.why ? v->pump.why : "broken");
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_PROTOCOL);
	}
}

/* ... then our MARK, if what it waits for has gone (completions come here, through pump). */
static void pump(struct vconn *v)
{
	pump_frames(v);
	mark_try(v);
}

/* A session message the provider sends itself (SWITCH): encoded here, not through txr. */
static int send_switch(struct vconn *v, uint64_t offset)
{
	struct san_msg m = { .type = SAN_T_SWITCH };
	uint8_t buf[64];
	int n;

	m.u.sw.offset = offset;
	n = san_msg_encode(&m, buf, sizeof(buf));
	if (n < 0)
		return n;
	return san_verbs_send(v->c, buf, (size_t)n);
}

/* ---- our MARK (protocol.md §9.2, rule 3) ---------------------------------------------- */

/* Write our MARK (or its rest) through the anchor: the application may have closed its number. */
static void mark_write_now(struct vconn *v)
{
	struct san_sock *s = v->s;
	int r = san_up_write_mark(s, v->anchor);

	if (r == -EAGAIN) {
		/* behind bytes of ours on TCP the peer has not read yet: v_timer tries again */
		if (!v->mark_wait) {
			v->mark_wait = true;
			(void)eventfd_write(v->kick, 1); /* v_run starts the timer, on the engine */
		}
		return;
	}
	v->mark_wait = false;
	s->mark_due = false;
	if (r < 0)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
}

/*
 * The MARK goes once (1) we are RUNNING (A: B's SWITCH proves ours delivered, protocol.md
 * §9.4), (2) txr was sent past mark_at (our first stream bytes or our end), and (3) those
 * SENDs completed: on RC the peer's HCA has them. A send posted but not completed is not at
 * the peer yet, and a MARK written at the post would wake its reader to an empty ring.
 */
static void mark_try(struct vconn *v)
{
	struct san_sock *s = v->s;
	uint64_t posted, done;

	if (!s->mark_due || !v->mark_armed || v->mark_wait || v->in_poll || !v->c || v->gone ||
	    (s->err && !v->rst_held) || v->stage != V_RUNNING)
		return; /* (after our reset too, while its RST waits: the peer reads the ABORT after it) */
	san_verbs_send_counts(v->c, &posted, &done);
	if (!v->mark_posted) {
		if (v->pump.cons < v->mark_at)
			return; /* still in txr (no credit, or no send slot, yet) */
		v->mark_posted = true;
		v->mark_sends = posted; /* (perhaps a few more than needed: never fewer) */
	}
	if (done >= v->mark_sends)
		mark_write_now(v);
}

/* ---- frames in ------------------------------------------------------------------------- */

/* One received frame into rxr: 0, -EAGAIN (no room), or -EPROTO. */
static int deliver(struct vconn *v, const void *msg, uint32_t len)
{
	struct san_sock *s = v->s;
	uint8_t type = ((const struct san_wire_hdr *)msg)->type;
	void *buf;
	int room = san_shm_ring_prod_reserve(&v->fill, len, &buf);

	if (room == -EAGAIN)
		return -EAGAIN;
	if (room < 0 || (uint32_t)room < len)
		return -EPROTO;
	san_rcvwin_rx_frame(&v->win_rx, v->fill.prod, v->fill.res_pad, (uint32_t)room);
	memcpy(buf, msg, len);
	room = san_shm_ring_prod_commit(&v->fill);
	if (room < 0)
		return -EPROTO; /* not a message header: the ring refuses to seal it */
	if (room == 1) {
		san_shm_ring_prod_bell(&v->fill); /* counted, as shm's producer counts (bells) */
		san_sock_ring_self(s);
	}
	if (type == SAN_T_DATA || type == SAN_T_DISCONNECT || type == SAN_T_ABORT)
		v->peer_stream = true; /* what the peer's MARK went after (v_mark_read) */
	/* the peer's FIN: X reads as TCP does after one (shm: the peer shuts our Y) */
	if (type == SAN_T_DISCONNECT && s->ylocal >= 0)
		(void)san_sys_shutdown(s->ylocal, SHUT_WR);
	return 0;
}

/*
 * A READ or GRANT transfer's FIRST DATA: on shm it and its SRC_AVAIL / WRITE_DONE enter the
 * ring together (both frames or neither); here they come as two SENDs, and a receive (a peek
 * above all) that saw the first alone would return its one byte where TCP returns what was
 * sent. So it waits in its slot for the second, and the two go into rxr at once.
 */
/* The transfer mode a DATA header's flags name (header bytes only: the engine validates). */
static unsigned int data_mode(const void *msg)
{
	const struct san_wire_hdr *h = msg;

	return (h->flags & SAN_DATA_F_MODE_MASK) >> SAN_DATA_F_MODE_SHIFT;
}

static bool bulk_first(const void *msg)
{
	/* header bytes only (every message is looked at here): the engine validates the rest */
	const struct san_wire_hdr *h = msg;
	unsigned int mode = data_mode(msg);

	return h->type == SAN_T_DATA && (h->flags & SAN_DATA_F_FIRST) &&
	       (mode == SAN_XMODE_READ || mode == SAN_XMODE_GRANT);
}

/* The held head, a bulk FIRST DATA, and the message after it: both into rxr, or neither. */
static int deliver_pair(struct vconn *v, const struct v_held *a, const struct v_held *b)
{
	void *buf;
	int r = san_shm_ring_prod_reserve(&v->fill,
					  (uint32_t)(san_frame_len(a->len) + san_frame_len(b->len)), &buf);

	if (r < 0)
		return r; /* -EAGAIN: no room for both yet (whatever the padding, two fit there) */
	r = deliver(v, a->msg, a->len);
	if (!r)
		r = deliver(v, b->msg, b->len);
	return r == -EAGAIN ? -EPROTO : r;
}

/*
 * May one more READ ahead go out now: are fewer out (posted, not yet reached by the
 * application) than SANSWITCH_READ_AHEAD says, or with auto than the depth san_ahead has found
 * from the application's stalls (docs/verbs.md §4)?
 */
static bool ahead_room(const struct vconn *v)
{
	uint32_t out = 0;

	for (uint32_t i = 0; i < v->nahead; i++)
		out += v->ahead[i].posted && !v->ahead[i].reached;
	return out < (san_cfg.read_ahead == SAN_CFG_READ_AHEAD_AUTO ? san_ahead_depth(&v->ra)
								     : san_cfg.read_ahead);
}

/* Post the READs of transfers waiting to be read ahead, in order, while there is room. */
static void ahead_post(struct vconn *v)
{
	struct san_sock *s = v->s;

	if (!s->peer_grant)
		return; /* the peer's area is not known yet: the first READ on demand posts these */
	for (uint32_t i = 0; i < v->nahead && !v->gone && !s->err; i++) {
		struct v_ahead *a = &v->ahead[i];
		uint64_t cookie = v->rd_seq + 1;
		int r;

		if (a->posted)
			continue;
		if (!ahead_room(v))
			return;
		r = san_verbs_read(v->c, &v->area, v->bulk + a->lo, s->peer_bulk_addr + a->lo,
				   s->peer_bulk_key, a->hi - a->lo, cookie);
		if (r == -EAGAIN)
			return; /* every RDMA slot busy: a completion brings us back */
		if (r < 0) {
			v_down(v, r);
			return;
		}
		v->rd_seq = cookie;
		a->cookie = cookie;
		a->posted = true;
	}
}

/* After completions: an RDMA slot may have come free for a READ ahead that found none. */
static void ahead_retry(struct vconn *v)
{
	if (v->nahead && v->stage == V_RUNNING)
		ahead_post(v);
}

/*
 * A bulk transfer's pair went into rxr. If the application has not finished the one before it
 * (it is behind: this one will wait in rxr), it may be READ into the mirror now rather than at
 * its first look, so that several READs are in flight and their round trips overlap the
 * application's reading of the earlier ones; how many may be in flight is the READ window's
 * (ahead_room). A receiver that keeps up gets nothing posted ahead: its receive READs the
 * bytes straight into its own buffer when it asks for them.
 */
static void read_ahead(struct vconn *v, const struct v_held *first, const struct v_held *second)
{
	struct san_sock *s = v->s;
	bool behind = v->bulk_open++ > 0; /* (counted whatever follows: v_xfer_done uncounts) */
	struct san_msg m;

	/*
	 * (queued even before the peer's WRITE_GRANT, which names its area, is read out of rxr: an
	 * application that has not read yet has not read that either; ahead_post waits for it)
	 */
	if (!behind || v->gone || !san_cfg.read_ahead || v->nahead == SAN_STAGE_RECS ||
	    !s->bulk_rx || data_mode(first->msg) != SAN_XMODE_READ)
		return;
	/* (the engine checks it again when it reads the pair; a bad one is not read ahead) */
	if (san_msg_decode(second->msg, second->len, SAN_CHAN_SESSION, second->len, &m) < 0 ||
	    m.type != SAN_T_SRC_AVAIL || m.u.src_avail.addr > v->bulk ||
	    m.u.src_avail.len > v->bulk - m.u.src_avail.addr)
		return;
	v->ahead[v->nahead++] = (struct v_ahead){ .lo = m.u.src_avail.addr,
						  .hi = m.u.src_avail.addr + m.u.src_avail.len,
						  .id = m.u.src_avail.xfer_id };
	ahead_post(v);
}

/* Move held receives into rxr while it has room; arm for the rest. */
static void refill(struct vconn *v)
{
	while (v->nheld) {
		struct v_held *h = &v->held[v->hhead], *h2 = &v->held[(v->hhead + 1) % V_NRECV];
		bool pair = bulk_first(h->msg);
		int r;

		if (pair && v->nheld < 2)
			return; /* its second frame has not come: on_msg calls us again */
		r = pair ? deliver_pair(v, h, h2) : deliver(v, h->msg, h->len);
		if (r == -EAGAIN) {
			/* room for the one, or for both as one message (as deliver_pair asks) */
			uint32_t need = pair ? (uint32_t)(san_frame_len(h->len) + san_frame_len(h2->len))
					     : h->len;

			if (san_shm_ring_prod_arm(&v->fill, need) == 1)
				continue; /* the application released room meanwhile */
			return;	  /* its next release calls wake_producer */
		}
		if (r < 0) {
			v->fail = true;
			return;
		}
		if (pair)
			read_ahead(v, h, h2);
		for (int i = pair ? 2 : 1; i > 0; i--) {
			(void)san_verbs_release(v->c, v->held[v->hhead].slot);
			v->hhead = (v->hhead + 1) % V_NRECV;
			v->nheld--;
		}
	}
	san_shm_ring_prod_disarm(&v->fill);
}

static int hold(struct vconn *v, const void *msg, uint32_t len)
{
	int64_t slot;

	if (v->nheld == V_NRECV)
		return -EPROTO; /* more than our slots: the transport would have refused */
	slot = san_verbs_hold(v->c);
	if (slot < 0)
		return -EPROTO;
	v->held[(v->hhead + v->nheld) % V_NRECV] = (struct v_held){ slot, msg, len };
	v->nheld++;
	if (san_shm_ring_prod_arm(&v->fill, len) == 1)
		refill(v);
	return 0;
}

static void b_commit(struct vconn *v, uint64_t offset);

/* The peer's SWITCH, its first message on the QP: its switch-over offset. */
static int on_switch(struct vconn *v, const void *msg, size_t len)
{
	struct san_sock *s = v->s;
	struct san_msg m;

	if (san_msg_decode(msg, len, SAN_CHAN_SIDE, (uint32_t)len, &m) < 0 ||
	    m.type != SAN_T_SWITCH || m.u.sw.offset < s->tcp_rx) {
		san_warn("fd %d: verbs: the peer's first message is not a valid SWITCH", s->fd);
		return -EPROTO;
	}
	if (v->b) {
		b_commit(v, m.u.sw.offset);
	} else {
		s->x_peer = m.u.sw.offset;
		s->rx = SK_RX_DRAIN;
		/*
		 * A's pause ends here, on the engine, not in the call that proposed (shm's does):
		 * a nonblocking reader told EAGAIN meanwhile is owed its edge, as B's is (b_commit)
		 */
		if (!s->proc->closing)
			san_sock_epoll_rearm_paused(s);
		pthread_cond_broadcast(&s->cond);
	}
	v->stage = V_RUNNING;
	run_add(v); /* run_lock after the sock's lock: spinners only trylock sock locks */
	return 0;
}

static void wake_area(struct vconn *v)
{
	if (v->s->tx_area_armed && v->s->ylocal >= 0)
		san_sock_unplug(v->s->ylocal);
	v->s->tx_area_armed = false;
}

/* The txr position up to which the peer's application has read (v_peer_read_to). */
static uint64_t peer_read_pos(const struct vconn *v)
{
	return san_rcvwin_tx_pos(&v->win_tx, v->pump.cons);
}

/* A send waiting for the peer's reads (v_peer_read_arm) goes on: they came, or never will. */
static void wake_window(struct vconn *v, bool gone)
{
	if (!v->read_armed || (!gone && (!v->win_heard || peer_read_pos(v) < v->read_want)))
		return;
	v->read_armed = false;
	if (v->s->ylocal >= 0)
		san_sock_unplug(v->s->ylocal);
}

/*
 * The peer's RCV_WINDOW: its receive window, and how many frame bytes of what we sent its
 * application has read. The window goes where window_limit reads it, in txr's header (the
 * provider plays txr's consumer). A count that goes backwards or past what we sent breaks
 * the protocol: this connection is reset.
 */
static int on_rcv_window(struct vconn *v, const void *msg, size_t len)
{
	struct san_sock *s = v->s;
	struct san_msg m;

	if (san_msg_decode(msg, len, SAN_CHAN_SESSION, (uint32_t)len, &m) < 0 ||
	    san_rcvwin_tx_report(&v->win_tx, m.u.rcv_window.consumed) < 0) {
		san_warn("fd %d: verbs: an RCV_WINDOW that is no count of our frames read (%llu; "
			 "%llu read before, %llu sent)", s->fd,
			 (unsigned long long)m.u.rcv_window.consumed,
			 (unsigned long long)v->win_tx.read, (unsigned long long)v->win_tx.sent);
		return -EPROTO;
	}
	san_shm_ring_cons_window(&v->pump, m.u.rcv_window.window);
	v->win_heard = true; /* (our first, if not out yet, answers it: the pump after the poll) */
	wake_window(v, false);
	return 0;
}

/*
 * The peer's READ_DONE: it has every byte of our transfer xfer_id (READ or GRANT), so the
 * region is ours again. They come in order, one per transfer (docs/verbs.md §4).
 */
static int on_read_done(struct vconn *v, const void *msg, size_t len)
{
	struct san_sock *s = v->s;
	struct san_msg m;

	if (san_msg_decode(msg, len, SAN_CHAN_SESSION, (uint32_t)len, &m) < 0 ||
	    m.u.read_done.status != SAN_XS_OK || v->rel_seq == v->tx_seq ||
	    m.u.read_done.xfer_id != (uint32_t)(v->rel_seq + 1)) {
		san_warn("fd %d: verbs: a READ_DONE for a transfer not outstanding (id %u; %llu of "
			 "%llu released)", s->fd, m.u.read_done.xfer_id,
			 (unsigned long long)v->rel_seq, (unsigned long long)v->tx_seq);
		return -EPROTO;
	}
	v->rel_seq++;
	atomic_fetch_add_explicit(&frames_sent, 1, memory_order_relaxed); /* progress, for exit */
	wake_area(v);
	return 0;
}

/*
 * A READ_DONE after our reset, while its RST waits for the peer's last READs of our area
 * (v_rst_due): the next transfer's, read or given up, is released; nothing else is a fault now.
 */
static void read_done_late(struct vconn *v, const void *msg, size_t len)
{
	struct san_msg m;

	if (san_msg_decode(msg, len, SAN_CHAN_SESSION, (uint32_t)len, &m) == 0 &&
	    v->rel_seq != v->tx_seq && m.u.read_done.xfer_id == (uint32_t)(v->rel_seq + 1)) {
		v->rel_seq++;
		atomic_fetch_add_explicit(&frames_sent, 1, memory_order_relaxed);
	}
}

static int on_msg(void *arg, const void *msg, size_t len)
{
	struct vconn *v = arg;
	uint8_t type;
	int r;

	if (len < SAN_HDR_LEN || len > V_MAX_MSG)
		return -EPROTO;
	v->rx_msgs++;
	type = ((const struct san_wire_hdr *)msg)->type;
	if (type == SAN_T_RCV_WINDOW && v->win_cap)
		/* (B's first comes before its SWITCH; an older peer never sends one) */
		return v->s->err ? 0 : on_rcv_window(v, msg, len);
	if (v->stage == V_WAIT_SWITCH)
		return on_switch(v, msg, len);
	/*
	 * The peer's stream ends here (delivered now or held): the disconnect that follows is
	 * its orderly close, not a reset. Held frames are kept until the application has them.
	 */
	if (type == SAN_T_DISCONNECT || type == SAN_T_ABORT)
		v->peer_done = true;
	if (v->s->err) {
		/* reset: nothing more is read (the slot goes back at once) ... */
		if (type == SAN_T_READ_DONE && v->rst_held)
			read_done_late(v, msg, len); /* ... but what its RST waits for is counted */
		return 0;
	}
	if (type == SAN_T_READ_DONE)
		return on_read_done(v, msg, len); /* ours: the provider frees the region */
	if (v->s->proc->closing && ((const struct san_wire_hdr *)msg)->type == SAN_T_DATA) {
		/* data for a closed connection: TCP answers with a reset, and so do we */
		san_sock_reset_locked(v->s, -ECONNRESET, SAN_R_APP_RESET);
		return 0;
	}
	if (!v->nheld && !bulk_first(msg)) {
		r = deliver(v, msg, (uint32_t)len);
		if (r != -EAGAIN)
			return r;
	}
	/* (a bulk FIRST DATA's second frame: hold's refill delivers the two, room permitting) */
	return hold(v, msg, (uint32_t)len);
}

/* ---- progress and the end -------------------------------------------------------------- */

/* The transport is gone (a failed completion, the peer's disconnect) or broke the rules. */
static void v_down(struct vconn *v, int r)
{
	struct san_sock *s = v->s;

	if (v->gone)
		return;
	v->gone = true;
	wake_area(v); /* a send waiting for a READ_DONE finds the error instead */
	wake_window(v, true); /* ... or for an RCV_WINDOW */
	san_debug("fd %d: verbs: transport %s (%s)", s->fd, r == -EPROTO ? "broken" : "down",
		  strerror(-r));
	if (v->b && v->stage == V_WAIT_SWITCH)
		return; /* B before commit: v_run falls back to TCP */
	if (r == -EPROTO || (!v->peer_done && !s->err))
		san_sock_reset_locked(s, -ECONNRESET, r == -EPROTO ? SAN_R_PROTOCOL : SAN_R_CHANNEL);
	pthread_cond_broadcast(&s->cond);
}

/*
 * Completions taken, counted by who took them (the stats line's verbs_cq_engine and
 * verbs_cq_app): how much of the data path runs in the application's own threads.
 */
static void v_taken(int n)
{
	if (n > 0)
		san_stats_add(san_engine_on_thread() ? SAN_STAT_VCQ_ENGINE : SAN_STAT_VCQ_APP,
			      (uint64_t)n);
}

/* The CQ's completions through on_msg (lock held): their number, or the transport's error. */
static int v_take(struct vconn *v)
{
	int r;

	v->in_poll = true;
	r = san_verbs_poll(v->c, on_msg, v);
	v->in_poll = false;
	v_taken(r);
	return r;
}

/*
 * The CQ left unarmed (docs/verbs.md §3, "Who polls"): after the engine's drain, while an
 * application thread spins on it and no thread sleeps in a wait, and the connection only
 * runs (no MARK, ending or reset to drive). The engine's tick looks every V_ARM_TICK, and arms
 * it once no application thread's spin has taken a message from it for V_APP_NS; a thread that goes to sleep arms
 * it first (san_prov_verbs_sleep). So a waiter the preload cannot see hears of new bytes within
 * about 2 ms when its process's threads have stopped spinning, at once otherwise.
 */
#define V_APP_NS 1000000ull
#define V_ARM_TICK 0.001

static bool v_app_owns(struct vconn *v)
{
	struct san_sock *s = v->s;
	uint64_t seen = atomic_load_explicit(&v->app_ns, memory_order_relaxed);

	return san_engine_on_thread() && v->stage == V_RUNNING && !v->gone && !v->ending &&
	       !v->mark_wait && !v->rst_held && !s->mark_due && !s->fin_pending && !s->err &&
	       !s->proc->closing && seen && san_sock_now_ns() - seen < V_APP_NS;
}

/* The CQ is armed (or the connection needs it no more): off the unarmed count. Lock held. */
static void v_armed(struct vconn *v)
{
	if (atomic_exchange(&v->unarmed, false))
		atomic_fetch_sub(&v_nunarmed, 1);
}

/*
 * Leave the CQ unarmed? (Engine thread, lock held, the CQ drained.) The flag goes up before
 * the sleepers are counted, as a sleeper counts itself before it looks at the flags: one of
 * the two sees the other (sequentially consistent), so a CQ is never left unarmed under a
 * sleeper that did not arm it.
 */
static bool v_leave_unarmed(struct vconn *v)
{
	if (!v_app_owns(v))
		return false;
	if (!atomic_exchange(&v->unarmed, true))
		atomic_fetch_add(&v_nunarmed, 1);
	if (atomic_load(&v_sleepers))
		return false; /* (the caller arms, and v_armed takes the flag down) */
	if (v_arm_loop != san_engine_loop()) {
		/* first use, or an engine built again (after san_engine_stop): not active there */
		ev_init(&v_arm_t, v_arm_tick);
		v_arm_loop = san_engine_loop();
	}
	if (!ev_is_active(&v_arm_t)) {
		ev_timer_set(&v_arm_t, V_ARM_TICK, V_ARM_TICK);
		san_ev.ev_timer_start(san_engine_loop(), &v_arm_t);
	}
	return true;
}

/* Take completions into rxr, send what waits, re-arm. Lock held. */
static void v_progress(struct vconn *v)
{
	int r;

	if (!v->c || v->gone)
		return;
	(void)san_verbs_ack(v->c);
	for (;;) {
		r = v_take(v);
		if (r < 0 || v->fail) {
			v_down(v, v->fail ? -EPROTO : r);
			return;
		}
		if (v->stage == V_RUNNING && v->nheld)
			refill(v);
		pump(v);
		if (r > 0) {
			ahead_retry(v);
			continue;
		}
		if (v_leave_unarmed(v))
			return;
		if (san_verbs_arm(v->c) > 0)
			continue;
		v_armed(v);
		return;
	}
}

/*
 * Our reset (docs/verbs.md §3, "Close"): its RST on the anchor waits until what the peer reads
 * before the ABORT has reached it, so that it resets after those bytes, as over TCP, rather than
 * at an RST that overtook them. Due (1) once txr is sent and its SENDs completed (on RC the
 * peer's HCA has them; rxe writes the receive completion before its ACK, and the peer takes its
 * CQ in before it believes the anchor's end), the peer has READ our regions (its READ_DONEs)
 * and our MARK, if it was still due, has gone and been acknowledged on TCP (an RST discards
 * what the send queue holds); or at once when the transport is down, and at rst_by whatever
 * is left (V_END_S: the peer may have stopped reading). 0: frames or READs still to come (a
 * completion brings the engine back); -1: only TCP's acknowledgement of the MARK (polled).
 */
static int v_rst_due(struct vconn *v)
{
	struct san_sock *s = v->s;
	struct san_verbs_info in;
	struct pollfd p = { v->anchor, 0, 0 };
	int queued = 0;

	if (!v->c || v->gone || san_sock_now_ns() >= v->rst_by)
		return 1;
	if (san_shm_ring_cons_peek(&v->pump, &(struct san_shm_frame){ 0 }) == 0)
		return 0;
	san_verbs_get_info(v->c, &in);
	if (in.sends_busy || v->rel_seq != v->tx_seq || (s->mark_due && v->mark_armed))
		return 0;
	if (SAN_SYS(SYS_ioctl, (long)v->anchor, (long)SIOCOUTQ, &queued) < 0 || queued <= 0)
		return 1;
	/* (a connection the peer has reset or closed already keeps its queue: nothing to wait for) */
	return san_sys_poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP)) ? 1 : -1;
}

/* The held RST goes now (lock held). */
static void v_rst_send(struct vconn *v)
{
	v->rst_held = false;
	san_sock_reset_anchor(v->s, v->anchor);
}

/* hold_reset: the frames go from the engine thread, after the sends returned (v_rst_due). */
static bool v_hold_reset(struct san_sock *s)
{
	struct vconn *v = s->pv;

	if (!v || !s->committed || v->anchor < 0 || !v->c || v->gone)
		return false;
	v->rst_held = true;
	v->rst_by = san_sock_now_ns() + (uint64_t)(V_END_S * 1e9);
	return true; /* (the closed hook, which follows, kicks the engine) */
}

/* Nothing more to do for the connection: its frames are out, or they never will be. */
static bool v_finished(struct vconn *v)
{
	struct san_sock *s = v->s;
	struct san_verbs_info in;

	if (v->b && v->stage == V_WAIT_SWITCH)
		return v->gone || s->proc->closing;
	if (v->gone)
		return !v->nheld || s->proc->closing || s->err;
	if (!s->proc->closing && !s->err)
		return false;
	if (!v->ending) {
		v->ending = true;
		v->end_by = san_ev.ev_now(san_engine_loop()) + V_END_S;
	}
	if (s->err && san_ev.ev_now(san_engine_loop()) >= v->end_by)
		return true;
	if (v->rst_held)
		return false; /* (v_run sends it when due; v_end at the latest) */
	san_verbs_get_info(v->c, &in);
	/* (the peer still reads our regions until its READ_DONEs: the area must stay) */
	return !s->fin_pending && san_shm_ring_cons_peek(&v->pump, &(struct san_shm_frame){ 0 }) ==
					   -EAGAIN && !in.sends_busy && v->rel_seq == v->tx_seq &&
	       (!s->mark_due || !v->mark_armed || s->err); /* the peer reads nothing before it */
}

/* On the engine: stop watching, close the transport, let the sock go. */
static void v_end(struct ev_loop *loop, struct vconn *v)
{
	struct san_sock *s = v->s;
	bool fallback;

	san_ev.ev_io_stop(loop, &v->cq_w);
	san_ev.ev_io_stop(loop, &v->cm_w);
	san_ev.ev_io_stop(loop, &v->kick_w);
	san_ev.ev_timer_stop(loop, &v->t);
	san_sock_lock(s);
	v_armed(v); /* (off the unarmed count: the tick stops when none is left) */
	fallback = v->b && v->stage == V_WAIT_SWITCH;
	if (v->rst_held)
		v_rst_send(v); /* (the dup closes below: the RST must not wait for s->tcp's close) */
	if (v->ra.reached)
		san_debug("fd %d: verbs: READ ahead at the end: depth %u; of %llu transfers reached "
			  "behind another, %llu waited for their bytes", s->fd,
			  san_ahead_depth(&v->ra), (unsigned long long)v->ra.reached,
			  (unsigned long long)v->ra.stalls);
	s->pv = NULL;
	run_del(v); /* after s->pv: nothing can put it back (run_add runs under this lock) */
	/* the private rings and X stay with the sock; the transport goes (a disconnect) */
	v_rc_destroy(v);
	san_verbs_dereg(&v->area);
	san_verbs_close(v->c);
	v->c = NULL;
	pthread_mutex_unlock(&s->lock);
	if (fallback)
		san_up_b_fallback(s, SAN_R_CHANNEL);
	san_debug("fd %d: verbs: connection ended", s->fd);
	v_free(v);
	san_sock_put(s);
}

static void v_run(struct ev_loop *loop, struct vconn *v)
{
	struct san_sock *s = v->s;
	eventfd_t n;
	bool done;
	int rst;

	(void)eventfd_read(v->kick, &n);
	san_sock_lock(s);
	v_progress(v);
	if (s->fin_pending && !s->err)
		san_sock_flush_fin(s); /* a close found txr full: the pump made room since */
	rst = v->rst_held ? v_rst_due(v) : 0;
	if (rst > 0)
		v_rst_send(v);
	if (v->gone) {
		/* nothing more comes from the QP; held frames move on the application's reads */
		san_ev.ev_io_stop(loop, &v->cq_w);
		san_ev.ev_io_stop(loop, &v->cm_w);
	}
	done = v_finished(v);
	if (!done && v->mark_wait && !ev_is_active(&v->t)) {
		/* the MARK's rest, as TCP's send buffer makes room (mark_write_now) */
		ev_timer_set(&v->t, 0.001, 0.001);
		san_ev.ev_timer_start(loop, &v->t);
	}
	if (!done && rst < 0) {
		/*
		 * The held RST waits for TCP's acknowledgement of our MARK: no event says it.
		 * (Not the MARK's own timer: the MARK is out. The ending's comes back after.)
		 */
		san_ev.ev_timer_stop(loop, &v->t);
		ev_timer_set(&v->t, 0.001, 0.);
		san_ev.ev_timer_start(loop, &v->t);
	}
	if (!done && v->ending && !ev_is_active(&v->t)) {
		ev_timer_set(&v->t, V_END_S, 0.);
		san_ev.ev_timer_start(loop, &v->t);
	}
	pthread_mutex_unlock(&s->lock);
	if (done)
		v_end(loop, v);
}

static void v_io(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	v_run(loop, w->data);
}

/* B: A's SWITCH did not come; later: the MARK's rest, or an ending's deadline. */
static void v_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct vconn *v = t->data;
	struct san_sock *s = v->s;

	(void)revents;
	san_sock_lock(s);
	if (v->b && v->stage == V_WAIT_SWITCH) {
		v->gone = true;
	} else if (v->mark_wait && (!s->err || v->rst_held)) {
		mark_write_now(v);
		if (v->mark_wait) {
			pthread_mutex_unlock(&s->lock);
			return; /* the repeating timer tries again */
		}
	}
	san_ev.ev_timer_stop(loop, t);
	pthread_mutex_unlock(&s->lock);
	v_run(loop, v);
}

/*
 * The CQs the engine left unarmed: each one no application thread has taken a message from
 * for V_APP_NS, or every one while a thread sleeps (one that found run_lock busy could not arm
 * them), gets a kick, and the engine's v_run for it arms it (v_progress decides). Not
 * v_run here: it may end the connection, which takes run_lock. The tick stops when none is
 * left unarmed.
 */
static void v_arm_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
	uint64_t now = san_sock_now_ns();

	(void)revents;
	if (!atomic_load(&v_nunarmed)) {
		san_ev.ev_timer_stop(loop, t);
		return;
	}
	pthread_mutex_lock(&run_lock);
	for (struct vconn *v = running; v; v = v->run_next)
		if (atomic_load(&v->unarmed) && v->kick >= 0 &&
		    (atomic_load(&v_sleepers) ||
		     now - atomic_load_explicit(&v->app_ns, memory_order_relaxed) >= V_APP_NS))
			(void)eventfd_write(v->kick, 1);
	pthread_mutex_unlock(&run_lock);
}

static void v_watch(void *arg)
{
	struct vconn *v = arg;
	struct ev_loop *loop = san_engine_loop();

	ev_io_init(&v->cq_w, v_io, san_verbs_fd(v->c), EV_READ);
	ev_io_init(&v->cm_w, v_io, san_verbs_cm_fd(v->c), EV_READ);
	ev_io_init(&v->kick_w, v_io, v->kick, EV_READ);
	v->cq_w.data = v->cm_w.data = v->kick_w.data = v;
	san_ev.ev_io_start(loop, &v->cq_w);
	san_ev.ev_io_start(loop, &v->cm_w);
	san_ev.ev_io_start(loop, &v->kick_w);
	if (!ev_is_active(&v->t) && v->b && v->stage == V_WAIT_SWITCH) {
		ev_timer_set(&v->t, V_SWITCH_S, 0.);
		san_ev.ev_timer_start(loop, &v->t);
	}
	v_run(loop, v); /* what came before the watchers did */
}

/* ---- the ops the engine calls (lock held) ---------------------------------------------- */

static void v_ring_peer(struct san_sock *s)
{
	if (s->pv)
		pump(s->pv);
}

static void v_wake_producer(struct san_sock *s)
{
	struct vconn *v = s->pv;
	bool held;

	if (!v || !v->c)
		return;
	held = v->nheld != 0;
	refill(v);
	if (v->in_poll)
		return;
	(void)win_report(v); /* (after refill, which disarms rxr's producer) */
	if (held || !v->win_rx.win_told)
		(void)eventfd_write(v->kick, 1); /* credits went back: the engine sends them */
}

/* The socket buffer sizes' bound on verbs: see peer_read_pos, on_rcv_window, win_report. */
static int v_peer_read_to(struct san_sock *s, uint64_t *pos)
{
	struct vconn *v = s->pv;

	if (!v)
		return -ECONNRESET;
	*pos = peer_read_pos(v);
	/*
	 * (the peer's first RCV_WINDOW comes with its commit when its application set a size, else
	 * as the answer to ours, which went at our commit: one round trip)
	 */
	return v->win_cap && !v->win_heard && !v->gone ? -EAGAIN : 0;
}

static int v_peer_read_arm(struct san_sock *s, uint64_t pos)
{
	struct vconn *v = s->pv;

	if (!v || v->gone || ((!v->win_cap || v->win_heard) && peer_read_pos(v) >= pos))
		return 1; /* (gone: the send finds the error) */
	v->read_want = pos;
	v->read_armed = true;
	return 0;
}

static void v_rcv_window_set(struct san_sock *s)
{
	struct vconn *v = s->pv;

	if (v && !v->in_poll)
		(void)win_report(v);
}

static void v_progress_op(struct san_sock *s)
{
	if (s->pv)
		v_progress(s->pv);
}

static bool v_peer_said_end(struct san_sock *s)
{
	struct vconn *v = s->pv;

	return v && v->peer_done;
}

/*
 * exit(): a process's connections end with it, as TCP's do, but TCP's kernel goes on sending
 * what the socket buffer holds while our frames wait in this process's memory (txr, send
 * slots not yet acknowledged): they would die with it. So exit() first ends every running
 * connection as close() would (DISCONNECT after its data) and waits until the frames are out,
 * while they move: up to V_EXIT_IDLE_S without progress (a peer that stopped reading: TCP's
 * kernel keeps such an orphan's buffer for its zero-window probes, 8 of them by default, a
 * minute or two; a reader that is only late, a server busy for a few seconds, must still get
 * every byte). _exit() comes here through its wrapper (san_prov_exit).
 */
#define V_EXIT_IDLE_S 60

static bool v_pending(struct vconn *v)
{
	struct san_sock *s = v->s;
	struct san_shm_frame f;
	struct san_verbs_info in;

	if (v->rst_held) {
		/* a reset: its frames are waited for too, up to its RST (bounded: rst_by) */
		if (v_rst_due(v) <= 0)
			return true;
		v_rst_send(v);
		return false;
	}
	if (v->gone || !v->c || s->err)
		return false;
	if (s->tx == SK_TX_SAN && !s->fin_sent)
		san_sock_send_fin(s); /* the process ends: its streams end, as its sockets would */
	san_verbs_get_info(v->c, &in);
	return s->fin_pending || san_shm_ring_cons_peek(&v->pump, &f) == 0 || in.sends_busy ||
	       v->rel_seq != v->tx_seq || (s->mark_due && v->mark_armed);
}

/* and never longer than this: other threads may keep streaming on connections made after */
#define V_EXIT_MAX_S 600

/*
 * Does this process run verbs connections (a vfork child shares our memory, not our
 * connections)? Every process's exit asks: one that never ran one reads no clock.
 */
static bool v_runs_here(void)
{
	return atomic_load_explicit(&nrunning, memory_order_relaxed) &&
	       getpid() == atomic_load(&run_pid);
}

static void v_flush_all(void)
{
	const uint64_t s_ns = 1000000000ull;
	uint64_t seen = atomic_load(&frames_sent);
	uint64_t start, idle_since;
	unsigned int lock_waits = 0;

	if (!v_runs_here())
		return;
	start = idle_since = san_sock_now_ns(); /* not time(): whole seconds */
	for (;;) {
		bool busy = false;
		uint64_t now_sent, now;

		if (pthread_mutex_trylock(&run_lock) != 0) {
			/*
			 * A spinner holds it, for a moment; or this very thread does, if a signal
			 * handler called exit() or _exit() during a spin, and then it never will:
			 * blocking would hang the exit, so after 1 s we give up.
			 */
			if (++lock_waits >= 1000 || san_sock_now_ns() - start >= V_EXIT_MAX_S * s_ns)
				return;
			(void)san_sys_poll(NULL, 0, 1);
			continue;
		}
		lock_waits = 0;
		for (struct vconn *v = running; v; v = v->run_next) {
			if (!san_sock_trylock(v->s)) {
				busy = true; /* someone works on it: look again */
				continue;
			}
			busy |= v_pending(v);
			if (v->kick >= 0)
				(void)eventfd_write(v->kick, 1); /* the engine pumps it */
			pthread_mutex_unlock(&v->s->lock);
		}
		pthread_mutex_unlock(&run_lock);
		if (!busy)
			return;
		now_sent = atomic_load(&frames_sent);
		now = san_sock_now_ns();
		if (now_sent != seen) {
			seen = now_sent;
			idle_since = now;
		} else if (now - idle_since >= V_EXIT_IDLE_S * s_ns ||
			   now - start >= V_EXIT_MAX_S * s_ns) {
			san_info("verbs: exit: frames still queued after %d s without progress (a "
				 "peer that does not read) or %d s in all: they are lost with the process",
				 V_EXIT_IDLE_S, V_EXIT_MAX_S);
			return;
		}
		(void)san_sys_poll(NULL, 0, 1); /* raw: not our poll wrapper */
	}
}

/*
 * Take in what the CQ holds from an application thread (lock held), as the engine thread would
 * but without ack or re-arm (the channel's events stay the engine's): the completions' work,
 * then held frames and txr. Completions handled (> 0 when something changed), or -ECONNRESET
 * with the transport down (the engine is kicked to end it).
 */
static int v_poll_here(struct vconn *v)
{
	int r = v_take(v);

	if (r < 0 || v->fail) {
		v_down(v, v->fail ? -EPROTO : r);
		(void)eventfd_write(v->kick, 1); /* the engine ends it */
		return -ECONNRESET;
	}
	if (r > 0) {
		if (v->nheld)
			refill(v);
		pump(v);
		ahead_retry(v);
	}
	return r;
}

/*
 * A cheap look at the CQ from a spinning application thread (lock held): no ack, no re-arm.
 * A look that took a message from the peer makes the thread the CQ's owner for V_APP_NS
 * (v_app_owns). Not any completion: its own sends' complete within a spin of any length, and
 * a spin too short for the peer's answer (the default's 50 us in a slow guest) would then
 * own the CQ and arm it at each sleep on the application's path, the tick running besides:
 * 35 % on a 64 B ping-pong's p50 under TCG (docs/measurements.md, "Over Soft-RoCE").
 */
static void v_spin_poll(struct san_sock *s)
{
	struct vconn *v = s->pv;
	uint32_t seen;

	if (!v || !v->c || v->gone || v->stage != V_RUNNING)
		return;
	seen = v->rx_msgs;
	if (v_poll_here(v) > 0 && v->rx_msgs != seen)
		atomic_store_explicit(&v->app_ns, san_sock_now_ns(), memory_order_relaxed);
}

static void v_exit_flush(void)
{
	/*
	 * A process whose fd table never held a TCP socket has no connection to end nor frame to
	 * flush: it returns before touching stdio, the connection list or the verbs state (pages
	 * every preloaded process, /bin/true too, otherwise faulted in at its exit).
	 */
	if (!__atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED))
		return;
	/*
	 * glibc flushes stdio after the atexit handlers: a bridged stream's bytes (the only stdio
	 * that reaches a switched connection: san_stdio.c) must not follow our FIN. Those streams
	 * alone: fflush(NULL) locked every stream, and waited for ever for one another thread
	 * held (a reader blocked in fgets(stdin)); glibc's own flush at exit takes no lock.
	 */
	void (*flush)(void) = __atomic_load_n(&san_core_stdio_flush, __ATOMIC_ACQUIRE);

	if (flush)
		flush();
	san_sock_exit_close(); /* the connections the program never closed end as TCP's would */
	v_flush_all();
}

void san_prov_verbs_exit(void);
void san_prov_verbs_exit(void)
{
	san_sock_exit_close();
	v_flush_all();
}

/*
 * exec(): the new image has neither our frames nor our QPs (its uverbs and rdma_cm files are
 * close-on-exec), so the peer would see the transport go down without a DISCONNECT, a reset,
 * and lose what was still queued. An inherited switched fd reads EOF in the new program
 * (san_sock_before_exec), a close-on-exec one is closed: either way this process's streams end
 * here, so they end as at exit (v_pending sends each one's DISCONNECT), the frames waited for.
 * Not san_sock_exit_close: the exec may fail, and the program must still find its sockets.
 */
bool san_prov_verbs_exec_wanted(void);
bool san_prov_verbs_exec_wanted(void)
{
	return v_runs_here();
}

void san_prov_verbs_exec(void);
void san_prov_verbs_exec(void)
{
	if (!v_runs_here())
		return;
	san_core_exec_flush_begins();
	v_flush_all();
}

void san_prov_verbs_spin(void);
void san_prov_verbs_spin(void)
{
	int cs;

	if (!atomic_load_explicit(&nrunning, memory_order_relaxed))
		return;
	/*
	 * No cancellation in here: the pump's writes and rdma-core's (a post, an arm) are
	 * cancellation points, and a thread must not leave with run_lock or a sock's lock held.
	 */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	if (pthread_mutex_trylock(&run_lock) == 0) {
		for (struct vconn *v = running; v; v = v->run_next)
			if (san_sock_trylock(v->s)) {
				v_spin_poll(v->s);
				pthread_mutex_unlock(&v->s->lock);
			}
		pthread_mutex_unlock(&run_lock);
	}
	pthread_setcancelstate(cs, NULL);
}

/* Arm, from an application thread, a CQ the engine left unarmed (lock held). */
static void v_arm_here(struct vconn *v)
{
	while (atomic_load(&v->unarmed) && v->c && !v->gone && san_verbs_arm(v->c) > 0 &&
	       v_poll_here(v) >= 0)
		;
	v_armed(v);
}

/*
 * An application thread is about to sleep in a wait (begin) or is back (!begin): while it
 * sleeps, completions must wake someone, so every CQ left unarmed is armed first, and the
 * engine arms the ones it drains meanwhile (v_leave_unarmed). True if counted as a sleeper
 * (pass it back with !begin). Locks are only tried, as a spin's are (a wait may run in a
 * signal handler that interrupted their holder): a CQ whose lock is busy is left to the
 * engine, kicked to look again (its holder may be the engine itself, deciding before it saw
 * this sleeper); with run_lock busy, to the engine's tick, within V_ARM_TICK.
 */
bool san_prov_verbs_sleep(bool begin);
bool san_prov_verbs_sleep(bool begin)
{
	int cs, n;

	if (!begin) {
		/*
		 * (Never below 0: a fork in a signal handler that interrupted a counted wait makes
		 * a child whose count starts at 0, and that wait's end comes there.)
		 */
		n = atomic_load(&v_sleepers);
		while (n > 0 && !atomic_compare_exchange_weak(&v_sleepers, &n, n - 1))
			;
		return false;
	}
	if (san_engine_on_thread())
		return false; /* (its waits are its loop's: it arms what it leaves) */
	/*
	 * (Counted even with no connection running yet: a thread asleep since before the first
	 * one is a sleeper all the same.)
	 */
	atomic_fetch_add(&v_sleepers, 1);
	if (!atomic_load(&v_nunarmed))
		return true;
	/* no cancellation while locks are held: as in san_prov_verbs_spin */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	if (pthread_mutex_trylock(&run_lock) == 0) {
		for (struct vconn *v = running; v; v = v->run_next) {
			if (!atomic_load(&v->unarmed))
				continue;
			if (san_sock_trylock(v->s)) {
				v_arm_here(v);
				pthread_mutex_unlock(&v->s->lock);
			} else if (v->kick >= 0) {
				/* its holder may be the engine, deciding before it saw us: again */
				(void)eventfd_write(v->kick, 1);
			}
		}
		pthread_mutex_unlock(&run_lock);
	}
	pthread_setcancelstate(cs, NULL);
	return true;
}

static void v_closed(struct san_sock *s)
{
	struct vconn *v = s->pv;

	if (v && v->kick >= 0)
		(void)eventfd_write(v->kick, 1);
}

/* ---- bulk: READ and GRANT (docs/verbs.md §4) ------------------------------------------- */

/*
 * Each side's bulk area is one registered region of 2 x bulk bytes: the first half holds our
 * transfers' regions (the peer RDMA-READs them: SRC_AVAIL), the second mirrors the peer's
 * first half, offset for offset (our READs land there, and the peer's RDMA WRITEs into its
 * grant). The sender's stage allocates the offsets of both, so a transfer's bytes sit at the
 * same offset on either side, and its region is free again at the peer's READ_DONE.
 */

static void v_rdma_done(void *arg, uint64_t cookie, int status)
{
	struct vconn *v = arg;

	/* (a failure breaks the connection: san_verbs_poll says so next) */
	if (!(cookie & V_WRITE_TAG)) {
		v->rd_done = cookie; /* (completions come in the order the READs were posted) */
		if (status)
			v->rd_failed = true;
	}
	v->rdma_full = false;
	wake_area(v);
}

/*
 * At commit, before HELLO (which offers READ and GRANT only with an area): register it. A
 * failure (RLIMIT_MEMLOCK, most often) leaves the connection without one: large sends then go
 * by copy through the control messages, as SANSWITCH_BULK=inline would send them.
 */
static atomic_bool area_warned;

static void v_bulk_setup(struct vconn *v)
{
	struct san_sock *s = v->s;
	uint8_t *area = (uint8_t *)s->map + v_area_off();
	int r = san_fault(SAN_FAULT_REG_FAIL)
			? -ENOMEM
			: san_verbs_reg(v->c, area, 2 * v->bulk,
					SAN_VERBS_REMOTE_READ | SAN_VERBS_REMOTE_WRITE, &v->area);

	if (r < 0) {
		/* a warning the first time (the limit is the user's to raise), then info */
		san_log(atomic_exchange(&area_warned, true) ? SAN_LOG_INFO : SAN_LOG_WARN,
			"fd %d: verbs: bulk area (%u KiB) not registered (%s%s): large sends go by "
			"copy", s->fd, (unsigned int)(2 * v->bulk >> 10), strerror(-r),
			r == -ENOMEM || r == -EPERM ? "; raise RLIMIT_MEMLOCK (ulimit -l)" : "");
		return;
	}
	s->bulk_tx = area;
	s->bulk_rx = area + v->bulk;
	s->bulk_size = v->bulk;
	s->region_max = V_REGION;
	s->bulk_addr = (uintptr_t)area;
	s->bulk_key = v->area.rkey;
	s->bulk_ready = true; /* registered: pinned, nothing left to commit */
	san_stage_init(&s->stage, v->bulk);
	san_verbs_set_rdma_cb(v->c, v_rdma_done, v);
}

/* A wait's deadline: ms from now (CLOCK_MONOTONIC). */
static void v_deadline(struct timespec *until, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, until);
	until->tv_sec += ms / 1000;
	until->tv_nsec += (ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

/* Sleep *nap_ns and double it (up to 1 ms) for next time; false, without sleeping, once until
 * has passed. */
static bool v_nap(const struct timespec *until, long *nap_ns)
{
	struct timespec now, nap;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec > until->tv_sec ||
	    (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec))
		return false;
	nap = (struct timespec){ 0, *nap_ns };
	(void)nanosleep(&nap, NULL);
	if (*nap_ns < 1000000)
		*nap_ns *= 2;
	return true;
}

/* san_sock_mark_flush: our first stream bytes or our end are in txr now. */
static void v_mark_after(struct san_sock *s)
{
	struct vconn *v = s->pv;

	if (!v)
		return;
	if (!v->mark_armed) {
		v->mark_armed = true;
		v->mark_at = s->txr.prod;
	}
	mark_try(v);
}

#define V_MARK_READ_MS 100 /* at most, for completions the HCA writes after its ACK */

/*
 * The peer's MARK was read. It went only once the frames before it (its first stream bytes or
 * its end) were acknowledged by our HCA (mark_try): they are in our CQ if the engine thread
 * has not taken them into rxr yet. Take them here, so that the receive that follows returns
 * them: a reader that select or poll woke with the MARK must not be told EAGAIN. (rxe writes
 * the receive completion before it sends the ACK; a device that writes it a moment after is
 * waited for, briefly.)
 */
static void v_mark_read(struct san_sock *s)
{
	struct vconn *v = s->pv;
	struct timespec until;
	long nap = 20000;

	/*
	 * A peer of an older build writes its MARK at its commit, before its bytes: waiting for
	 * them here would hold the lock (and the engine) up to V_MARK_READ_MS for nothing sure
	 */
	if (!v || !v->c || !v->peer_marks_late)
		return;
	v_deadline(&until, V_MARK_READ_MS);
	while (!v->peer_stream && !v->gone && !s->err && v_poll_here(v) >= 0 && !v->peer_stream &&
	       v_nap(&until, &nap))
		;
}

/*
 * An application thread waits for an RDMA completion (lock held): poll the CQ, handling what
 * else comes as spin_poll does, and sleep a little between looks (20 us, doubling up to 1 ms)
 * rather than on the completion channel, whose events stay the engine thread's. 0, or -errno
 * with the connection reset.
 */
static int v_rdma_wait(struct vconn *v, const struct timespec *until, long *nap_ns)
{
	int r = v_poll_here(v);

	if (r < 0)
		return r;
	if (r > 0) {
		*nap_ns = 20000;
		return 0;
	}
	if (!v_nap(until, nap_ns)) {
		san_warn("fd %d: verbs: an RDMA READ did not complete in %d s: resetting",
			 v->s->fd, V_READ_MAX_S);
		san_sock_reset_locked(v->s, -ECONNRESET, SAN_R_CHANNEL);
		return -ECONNRESET;
	}
	return 0;
}

/*
 * A READ we stop waiting for (the connection broke, or it took V_READ_MAX_S) may still be
 * placing bytes: that is harmless in the mirror, not in the application's buffer, which is
 * the caller's again once recv returns. So the QP goes to the error state, where nothing more
 * is placed, and the READ's completion (flushed) is waited for.
 */
static void v_read_abandon(struct vconn *v, uint64_t cookie)
{
	struct timespec until;
	long nap = 20000;

	san_verbs_kill(v->c);
	v_deadline(&until, V_KILL_WAIT_S * 1000L);
	for (;;) {
		(void)v_poll_here(v); /* (-ECONNRESET from now on; it still drains the CQ) */
		if (v->rd_done >= cookie)
			return;
		if (!v_nap(&until, &nap)) {
			san_err("fd %d: verbs: a READ's completion never came after the QP was "
				"broken: the device may still write into the buffer it was given",
				v->s->fd);
			return;
		}
	}
}

/*
 * Wait for the READ with this cookie (posted: READs complete in the order they were posted, so
 * it is done once rd_done reaches it). 0 only if it completed successfully; -ECONNRESET
 * otherwise (the caller resets the connection if it is not already). Either way the READ is
 * over when this returns.
 */
static int v_read_wait(struct vconn *v, uint64_t cookie, struct timespec *until, long *nap)
{
	struct san_sock *s = v->s;

	while (v->rd_done < cookie && !s->err)
		if (v_rdma_wait(v, until, nap) < 0)
			break;
	if (v->rd_done < cookie)
		v_read_abandon(v, cookie);
	/* (a failed or flushed READ completes too: its bytes are not there) */
	return v->rd_done < cookie || v->rd_failed || v->gone || s->err ? -ECONNRESET : 0;
}

/* READ len bytes at off of the peer's area into local at loff, synchronously: v_read_wait. */
static int v_read_sync(struct vconn *v, const struct san_verbs_region *local, size_t loff,
		       uint64_t off, size_t len)
{
	struct san_sock *s = v->s;
	struct timespec until;
	long nap = 20000;
	uint64_t cookie;
	int r;

	v_deadline(&until, V_READ_MAX_S * 1000L);
	for (;;) {
		/* (the cookie is taken at the post: waiting may post READs ahead meanwhile) */
		r = san_verbs_read(v->c, local, loff, s->peer_bulk_addr + off, s->peer_bulk_key,
				   len, v->rd_seq + 1);
		if (r != -EAGAIN)
			break;
		if (v_rdma_wait(v, &until, &nap) < 0) /* every RDMA slot busy: one must finish */
			return -ECONNRESET;
	}
	if (r < 0) {
		v_down(v, r);
		return -ECONNRESET;
	}
	cookie = ++v->rd_seq;
	ahead_post(v); /* transfers waiting behind this one: their READs queue behind it */
	return v_read_wait(v, cookie, &until, &nap);
}

/*
 * Wait for the READ posted ahead for the transfer whose rest ends at end, if there is one
 * covering off: 1 (its bytes are in the mirror), 0 (none), -ECONNRESET. One still waiting for
 * the depth to allow it is the caller's to READ now (straight into its buffer, if it can).
 */
static int v_ahead_wait(struct vconn *v, uint64_t off, uint64_t end)
{
	struct timespec until;
	long nap = 20000;
	uint32_t i;

	for (i = 0; i < v->nahead; i++)
		if (v->ahead[i].hi == end && v->ahead[i].lo <= off)
			break;
	if (i == v->nahead)
		return 0;
	if (!v->ahead[i].reached) {
		/*
		 * The first look: did the pipeline have its bytes ready (san_ahead's feedback)? A
		 * READ done on the device but not yet polled (the engine could not poll while we
		 * held the lock) was ready: look at the CQ before judging.
		 */
		if (v->ahead[i].posted && v->rd_done < v->ahead[i].cookie && v_poll_here(v) < 0)
			return -ECONNRESET;
		v->ahead[i].reached = true;
		san_ahead_reached(&v->ra, !v->ahead[i].posted || v->rd_done < v->ahead[i].cookie);
		if (!v->ahead[i].posted) {
			/* the caller READs it now (and v_read_sync posts the next ones behind) */
			memmove(&v->ahead[i], &v->ahead[i + 1],
				(v->nahead - i - 1) * sizeof(v->ahead[0]));
			v->nahead--;
			return 0;
		}
		ahead_post(v); /* one fewer out: the next may go (entries stay where they are) */
	}
	v_deadline(&until, V_READ_MAX_S * 1000L);
	if (v_read_wait(v, v->ahead[i].cookie, &until, &nap) < 0)
		return -ECONNRESET;
	if (!v->ahead[i].used) {
		v->ahead[i].used = true;
		san_stats_add(SAN_STAT_VAHEAD_RX_BYTES, v->ahead[i].hi - v->ahead[i].lo);
	}
	return 1;
}

/* READ [off, end) of the peer's area into our mirror. 0 or -ECONNRESET. */
static int v_fetch(struct vconn *v, uint64_t off, uint64_t end)
{
	if (v_read_sync(v, &v->area, v->bulk + off, off, end - off) < 0)
		return -ECONNRESET;
	v->fetch_lo = off;
	v->fetch_hi = end;
	return 0;
}

/* ---- READ into the application's buffer (docs/verbs-registration.md) ------------------- */

/*
 * What the caches of the process may pin together: a quarter of what it may pin (v_pin_limit;
 * the rest is for the connections' slots and areas), V_RC_BYTES at most (also without a limit).
 */
static atomic_uint_fast64_t rc_pinned; /* bytes the caches' registrations pin now */

static uint64_t v_rc_budget(void)
{
	uint64_t b = v_pin_limit() / 4;

	return b > V_RC_BYTES ? V_RC_BYTES : b ? b : 1;
}

static int v_rc_reg(void *ctx, void *addr, size_t len, unsigned int access, struct san_reg *out)
{
	struct vconn *v = ctx;
	struct san_verbs_region r;
	int rc;

	if (atomic_fetch_add(&rc_pinned, len) + len > v_rc_budget()) {
		atomic_fetch_sub(&rc_pinned, len);
		return -ENOMEM;
	}
	san_memhook_pinned(1); /* before the pages are pinned: the wrappers look from now on */
	rc = san_fault(SAN_FAULT_REG_FAIL) ? -ENOMEM : san_verbs_reg(v->c, addr, len, access, &r);
	if (rc < 0) {
		san_memhook_pinned(-1);
		atomic_fetch_sub(&rc_pinned, len);
		return rc;
	}
	*out = (struct san_reg){ .mr = r.mr, .lkey = r.lkey, .rkey = r.rkey };
	return 0;
}

/* (Any thread: an invalidate in another thread's free() deregisters what nobody uses.) */
static void v_rc_dereg(void *ctx, const struct san_reg *reg)
{
	struct san_verbs_region r = { .mr = reg->mr };
	size_t len = san_verbs_mr_len(reg->mr);

	(void)ctx;
	san_verbs_dereg(&r);
	san_memhook_pinned(-1);
	atomic_fetch_sub(&rc_pinned, len);
}

static struct san_regcache *v_rc(struct vconn *v)
{
	struct san_regcache_ops ops = { .reg = v_rc_reg, .dereg = v_rc_dereg, .ctx = v };
	struct san_regcache_limits lim = { .max_entries = V_RC_ENTRIES };

	if (v->rc || v->rc_off)
		return v->rc;
	lim.max_bytes = v_rc_budget();
	if (!san_verbs_fork_unneeded()) {
		/*
		 * rdma-core's fork support (RDMAV_FORK_SAFE, ibv_fork_init on a kernel without
		 * copy-on-fork for pinned pages) marks registered ranges MADV_DONTFORK and
		 * deregisters under its own lock, which a free() inside it would re-enter: no
		 * registrations of application memory then.
		 */
		san_debug("fd %d: verbs: rdma-core fork support is on: receives copy", v->s->fd);
	} else if (san_regcache_create(&ops, &lim, &v->rc) < 0) {
		v->rc = NULL;
	} else if (san_memhook_add(v->rc) < 0) {
		/* nobody would tell it about freed memory: it must not be used */
		san_regcache_destroy(v->rc);
		v->rc = NULL;
	}
	v->rc_off = !v->rc;
	return v->rc;
}

static void v_rc_destroy(struct vconn *v)
{
	if (!v->rc)
		return;
	san_memhook_del(v->rc); /* first: then no invalidate runs inside it */
	san_regcache_destroy(v->rc);
	v->rc = NULL;
}

/* Hits and misses since the last look, into the process's counters; true if this one missed. */
static bool v_rc_count(struct vconn *v)
{
	struct san_regcache_stats st;
	bool missed;

	san_regcache_get_stats(v->rc, &st);
	missed = st.misses != v->rc_misses;
	san_stats_add(SAN_STAT_VREG_HITS, st.hits - v->rc_hits);
	san_stats_add(SAN_STAT_VREG_MISSES, st.misses - v->rc_misses);
	v->rc_hits = st.hits;
	v->rc_misses = st.misses;
	return missed;
}

/*
 * The destination of n bytes at byte `at` of iov, if they are one contiguous piece worth a READ
 * of their own; NULL otherwise. A program that receives into fresh buffers every time (each a
 * registration, slower than the copy it saves) is detected by its misses and left to the
 * mirror for a while. The calling thread's stack is reported at its exit from now on (the
 * buffer may be on it).
 */
static void *v_direct_dst(struct vconn *v, const struct iovec *iov, int iovcnt, size_t at,
			  size_t n)
{
	if (n < V_DIRECT_MIN || !san_cfg.direct || v->rc_off || !san_memhook_watch_stack())
		return NULL;
	if (v->pause) {
		v->pause--;
		return NULL;
	}
	for (int i = 0; i < iovcnt; i++) {
		if (at < iov[i].iov_len)
			return iov[i].iov_len - at >= n ? (uint8_t *)iov[i].iov_base + at : NULL;
		at -= iov[i].iov_len;
	}
	return NULL;
}

/*
 * READ [off, off + n) of the peer's area straight into dst, registered through the cache.
 * 0; -ECONNRESET; another -errno when dst cannot be registered (then the mirror serves).
 */
static int v_read_direct(struct vconn *v, uint64_t off, void *dst, size_t n)
{
	struct san_regcache *rc = v_rc(v);
	struct san_regcache_entry *e;
	struct san_verbs_region local;
	int r;

	if (!rc)
		return -ENOMEM;
	r = san_regcache_lookup(rc, dst, n, 0 /* local writes only */, &e);
	if (v_rc_count(v)) {
		if (++v->miss_streak >= V_MISS_STREAK) {
			v->miss_streak = 0;
			v->pause = V_MISS_PAUSE;
		}
	} else {
		v->miss_streak = 0;
	}
	if (r < 0) {
		san_debug("fd %d: verbs: receive buffer of %zu bytes not registered (%s): copying",
			  v->s->fd, n, strerror(-r));
		return r;
	}
	local = (struct san_verbs_region){ .addr = (void *)e->start, .len = e->end - e->start,
					   .lkey = e->reg.lkey, .rkey = e->reg.rkey, .mr = e->reg.mr };
	r = v_read_sync(v, &local, (uintptr_t)dst - e->start, off, n);
	san_regcache_release(rc, e);
	if (!r)
		san_stats_add(SAN_STAT_VDIRECT_RX_BYTES, n);
	return r;
}

/*
 * GRANT: the peer's RDMA WRITE placed the bytes in our mirror before its WRITE_DONE came (RC
 * ordering). READ: a large contiguous piece a receive asks for is read straight into the
 * caller's buffer; otherwise the first look at a transfer (or a READ posted ahead) reads all of
 * its rest into the mirror, and later looks, a peek's included, copy from there.
 */
static int v_bulk_copy(struct san_sock *s, bool read, bool peek, uint64_t off, uint64_t end,
		       const struct iovec *iov, int iovcnt, size_t at, size_t n)
{
	struct vconn *v = s->pv;

	if (read && !(v && off >= v->fetch_lo && off + n <= v->fetch_hi)) {
		void *dst;
		int ahead;

		if (!v || !v->c || v->gone || !s->peer_grant) {
			/* no transport to read with, or an SRC_AVAIL before the peer's area's key */
			if (!s->err)
				san_sock_reset_locked(s, -ECONNRESET,
						      v && !v->gone ? SAN_R_PROTOCOL : SAN_R_CHANNEL);
			return -ECONNRESET;
		}
		ahead = v_ahead_wait(v, off, end);
		if (ahead < 0)
			return ahead;
		/* (a peek reads into the mirror: the receive after it copies from there) */
		dst = ahead || peek ? NULL : v_direct_dst(v, iov, iovcnt, at, n);
		if (dst) {
			int r = v_read_direct(v, off, dst, n);

			if (r == 0 || r == -ECONNRESET)
				return r;
			/* (not registered: the mirror serves) */
		}
		if (!ahead && v_fetch(v, off, end) < 0)
			return -ECONNRESET;
	}
	san_conn_iov_copy(iov, iovcnt, at, s->bulk_rx + off, n, true);
	return 0;
}

/* GRANT: RDMA WRITE our region's [off, off + len) to the same offset of the peer's mirror. */
static int v_bulk_push(struct san_sock *s, uint64_t off, uint64_t len)
{
	struct vconn *v = s->pv;
	int r;

	if (!v || !v->c || v->gone) {
		if (!s->err)
			san_sock_reset_locked(s, -ECONNRESET, SAN_R_CHANNEL);
		return -ECONNRESET;
	}
	r = san_verbs_write(v->c, &v->area, off, s->peer_bulk_addr + v->bulk + off,
			    s->peer_bulk_key, len, V_WRITE_TAG | off);
	if (r == -EAGAIN) {
		v->rdma_full = true;
		return -EAGAIN;
	}
	if (r < 0) {
		v_down(v, r);
		return -ECONNRESET;
	}
	return 0;
}

/*
 * A region is freed by its transfer's READ_DONE: its key is the transfer's sequence number
 * (the id on the wire, but 64 bits wide: a key never wraps under the stage's comparisons).
 */
static uint64_t v_area_key(struct san_sock *s)
{
	struct vconn *v = s->pv;

	return v ? ++v->tx_seq : 0; /* (never without v: send_region checked area_released) */
}

static int v_area_released(struct san_sock *s, uint64_t *key)
{
	struct vconn *v = s->pv;

	if (!v || !v->c || v->gone) {
		/* no READ_DONE can come any more: a send that needs the area cannot go on */
		if (!s->err)
			san_sock_reset_locked(s, -ECONNRESET, SAN_R_CHANNEL);
		return -ECONNRESET;
	}
	*key = v->rel_seq;
	return 0;
}

static int v_area_arm(struct san_sock *s)
{
	struct vconn *v = s->pv;

	if (!v || !v->c || v->gone ||
	    (!v->rdma_full && (san_stage_idle(&s->stage) || san_stage_oldest(&s->stage) <= v->rel_seq)))
		return 1; /* (the send then finds room, or the error) */
	s->tx_area_armed = true;
	return 0;
}

/* We delivered all of the peer's transfer id: READ_DONE frees its region there. */
static void v_xfer_done(struct san_sock *s, uint32_t id)
{
	struct vconn *v = s->pv;

	if (!v)
		return;
	v->fetch_lo = v->fetch_hi = 0; /* the next transfer may use these offsets */
	if (v->bulk_open)
		v->bulk_open--;
	for (uint32_t i = 0; i < v->nahead; i++)
		if (v->ahead[i].id == id) {
			/* (done: the transfer's bytes were all delivered, so they were waited for) */
			memmove(&v->ahead[i], &v->ahead[i + 1],
				(v->nahead - i - 1) * sizeof(v->ahead[0]));
			v->nahead--;
			break;
		}
	if (v->ndone == SAN_STAGE_RECS) {
		/* more transfers open than the sender may have: it broke the rules */
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_PROTOCOL);
		return;
	}
	v->done_ids[(v->done_head + v->ndone) % SAN_STAGE_RECS] = id;
	v->ndone++;
	pump(v);
}

/* ---- A: the upgrade in the first data call --------------------------------------------- */

/*
 * Peers whose connect went unanswered (a host without RDMA behind a RoCE route answers
 * nothing: the CM retries until V_CONNECT_MS). Each costs that wait once; for the next
 * V_DEAF_S seconds connections to it stay TCP at once (reason no_peer). A few entries, a
 * process-wide lock: this runs once per connection, before any data.
 */
#define V_DEAF_N 16
#define V_DEAF_S 60
static struct {
	uint8_t addr[16];
	time_t until;
} deaf[V_DEAF_N];
static unsigned int deaf_next;
static pthread_mutex_t deaf_lock = PTHREAD_MUTEX_INITIALIZER;

static bool deaf_peer(const struct san_addr *a, bool add)
{
	time_t now = time(NULL);
	bool hit = false;

	pthread_mutex_lock(&deaf_lock);
	for (unsigned int i = 0; i < V_DEAF_N && !hit; i++)
		hit = deaf[i].until > now && !memcmp(deaf[i].addr, a->addr, 16);
	if (add && !hit) {
		memcpy(deaf[deaf_next].addr, a->addr, 16);
		deaf[deaf_next].until = now + V_DEAF_S;
		deaf_next = (deaf_next + 1) % V_DEAF_N;
	}
	pthread_mutex_unlock(&deaf_lock);
	return hit;
}

static void addr_str(const struct san_addr *a, char *buf, size_t len)
{
	if (san_addr_is_v4(a))
		inet_ntop(AF_INET, a->addr + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, a->addr, buf, (socklen_t)len);
}

/* Wait (lock held, nothing else can run on this connection) until one message may be sent. */
static int a_wait_credit(struct vconn *v, int ms)
{
	for (int waited = 0; !san_verbs_can_send(v->c); waited++) {
		struct pollfd p = { san_verbs_fd(v->c), POLLIN, 0 };
		int r = san_verbs_poll(v->c, on_msg, v); /* B sends nothing before our SWITCH */

		v_taken(r);
		if (r < 0)
			return r;
		if (r > 0 || san_verbs_can_send(v->c))
			continue;
		if (san_verbs_arm(v->c) > 0)
			continue;
		if (waited >= ms)
			return -ETIMEDOUT;
		if ((r = san_sys_poll(&p, 1, 1)) == -EINTR)
			san_sig_note_eintr(); /* (the application's call: san_sig.h) */
		else if (r < 0)
			return -ETIMEDOUT;
		(void)san_verbs_ack(v->c);
	}
	return 0;
}

/* A REJECT that names the port where another process of B's serves the connection. */
static bool redirected(const struct v_accept *acc, size_t alen)
{
	const struct v_reject *rj = (const struct v_reject *)acc;

	return alen >= sizeof(*rj) && be32toh(rj->magic) == V_REJECT_MAGIC &&
	       be16toh(rj->reason) == SAN_R_NOT_OWNER && rj->port;
}

static int v_propose(struct san_sock *s)
{
	struct v_propose pp = { 0 };
	struct v_accept acc = { 0 };
	struct san_verbs_conn *c = NULL;
	struct vconn *v;
	char host[INET6_ADDRSTRLEN];
	size_t alen = sizeof(acc), agreed;
	uint64_t rtt_us, rate;
	uint32_t mib;
	int r;

	r = san_owner_tuple(s->fd, &s->tuple);
	if (r == -ENOTCONN)
		return 0; /* a nonblocking connect still in progress: at the next call */
	s->attempted = true;
	if (s->ep_overflow || s->tcp_tx || s->tcp_rx)
		return san_up_fallback(s, SAN_R_STATE);
	if (r < 0)
		return san_up_fallback(s, SAN_FB_NO_PROVIDER);
	if (v_absent || deaf_peer(&s->tuple.peer, false))
		return SAN_PROV_NO_PEER;
	san_fd_guard_enter(); /* (area_want may open the devices: their fds are not ours to track) */
	mib = area_want(s->tcp, &rtt_us, &rate);
	san_fd_guard_leave();
	v = v_new(area_take(mib));
	if (!v)
		return san_up_fallback(s, SAN_R_RESOURCES);
	pp.area_mib = (uint8_t)(v->bulk / V_MIB);
	s->nonce_mine = san_up_nonce();
	pp.magic = htobe32(V_PROPOSE_MAGIC);
	pp.ver_min = pp.ver_max = SAN_PROTO_VERSION;
	pp.caps = htobe16(V_CAPS | SAN_CAP_RCV_WINDOW | SAN_CAP_MARK_DELIVERED);
	pp.nonce = htobe64(s->nonce_mine);
	memcpy(pp.src, s->tuple.local.addr, 16);
	memcpy(pp.dst, s->tuple.peer.addr, 16);
	pp.sport = htobe16(s->tuple.local.port);
	pp.dport = htobe16(s->tuple.peer.port);
	addr_str(&s->tuple.peer, host, sizeof(host));
	san_fd_guard_enter();
	r = san_verbs_connect(host, s->tuple.peer.port, &v_params, &pp, sizeof(pp), V_CONNECT_MS,
			      &c, &acc, &alen);
	if (r == -ECONNREFUSED && redirected(&acc, alen)) {
		/* another process of B's serves it (a worker, a fork child): once, there */
		uint16_t port = be16toh(((struct v_reject *)&acc)->port);

		san_debug("fd %d: verbs: the listener sends us to port %u", s->fd, (unsigned)port);
		alen = sizeof(acc);
		r = san_verbs_connect(host, port, &v_params, &pp, sizeof(pp), V_CONNECT_MS, &c,
				      &acc, &alen);
	}
	san_fd_guard_leave();
	if (r < 0) {
		v_free(v);
		if (v_absent_errno(r) && !v_absent) {
			v_absent = 1;
			san_debug("verbs: no rdma_cm here (%s): connections stay off verbs",
				  strerror(-r));
		}
		if (r == -ECONNREFUSED && alen >= sizeof(struct v_reject) &&
		    be32toh(((struct v_reject *)&acc)->magic) == V_REJECT_MAGIC)
			return san_up_fallback(s, be16toh(((struct v_reject *)&acc)->reason));
		if (r == -ENOMEM || r == -EPERM)
			return san_up_fallback(s, SAN_R_RESOURCES); /* RLIMIT_MEMLOCK, most likely */
		if (r == -ETIMEDOUT) {
			san_info("verbs: %s did not answer within %d ms: connections to it stay on "
				 "TCP for %d s", host, V_CONNECT_MS, V_DEAF_S);
			(void)deaf_peer(&s->tuple.peer, true);
		}
		return SAN_PROV_NO_PEER; /* no listener, route or device: the peer is not on verbs */
	}
	v->c = c;
	agreed = (acc.area_mib ? acc.area_mib : 1) * (size_t)V_MIB;
	if (alen < sizeof(acc) || be32toh(acc.magic) != V_ACCEPT_MAGIC ||
	    acc.version != SAN_PROTO_VERSION || be32toh(acc.max_msg) < V_MAX_MSG ||
	    agreed > v->bulk) {
		v_free(v); /* B sees the disconnect before our SWITCH: it resumes TCP */
		return san_up_fallback(s, SAN_R_MALFORMED);
	}
	if (agreed < v->bulk) {
		/* B took less: the rest of what we counted goes back (the mapping stays as it is) */
		atomic_fetch_sub(&area_extra, 2 * (v->bulk - agreed));
		v->bulk = agreed;
	}
	san_debug("fd %d: verbs: bulk area %zu MiB each way (min RTT %llu us x port %llu Mbit/s%s)",
		  s->fd, v->bulk / V_MIB, (unsigned long long)rtt_us,
		  (unsigned long long)(rate / 1000000),
		  san_cfg.verbs_area == SAN_CFG_VERBS_AREA_AUTO ? "; auto" : "; SANSWITCH_VERBS_AREA");
	if (v_attach(v, s) < 0) {
		v_free(v);
		return san_up_fallback(s, SAN_R_RESOURCES);
	}
	s->nonce_peer = be64toh(acc.nonce);
	s->peer_caps = be32toh(acc.caps) & V_CAPS; /* what its HELLO may offer */
	v->win_cap = be32toh(acc.caps) & SAN_CAP_RCV_WINDOW;
	v->peer_marks_late = be32toh(acc.caps) & SAN_CAP_MARK_DELIVERED;
	/*
	 * ---- commit: SWITCH (X_A = 0), HELLO; B's SWITCH says X_B; the MARK follows our first
	 * stream bytes or our end, once they are delivered (mark_try) ----
	 */
	r = a_wait_credit(v, V_SWITCH_MS);
	if (!r)
		r = send_switch(v, s->tcp_tx);
	if (r < 0) {
		/* B sees the disconnect before any SWITCH: it resumes TCP, and so do we */
		s->pv = NULL;
		v->s = NULL;
		v_free(v);
		san_sock_put(s); /* v_attach's; the caller still holds one */
		return san_up_fallback(s, SAN_R_CHANNEL); /* unmaps the rings, closes X */
	}
	v->switch_sent = true;
	san_sock_commit(s);
	s->tx = SK_TX_SAN;
	s->rx = SK_RX_PAUSED; /* until B's SWITCH: no receive may read past X_B */
	s->mark_due = true;   /* (another thread's send may arm it while we wait below) */
	if (s->peer_caps) /* (a peer of an older build offers none: it would refuse our grant) */
		v_bulk_setup(v);
	if (san_engine_call(v_watch, v) < 0 || san_conn_send_hello(s) < 0) {
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_RESOURCES);
		return 0;
	}
	/*
	 * The MARK only once B's SWITCH proves that ours was delivered (protocol.md §9.4: a SEND
	 * merely posted may be lost with the QP, and B would then resume TCP and read our MARK
	 * as data): mark_try waits for V_RUNNING. Meanwhile the lock is let go; other threads'
	 * sends queue behind HELLO.
	 */
	{
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += V_SWITCH_MS / 1000;
		while (s->rx == SK_RX_PAUSED && !s->err &&
		       pthread_cond_timedwait(&s->cond, &s->lock, &until) == 0)
			;
	}
	if (s->rx == SK_RX_PAUSED && !s->err) {
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TIMEOUT);
		return 0;
	}
	if (!s->err && s->pv)
		mark_try(s->pv); /* another thread's bytes went meanwhile */
	san_debug("fd %d: committed (A, verbs), peer's X %llu", s->fd,
		  (unsigned long long)s->x_peer);
	return 0;
}

/* ---- B: the listener, on the engine ---------------------------------------------------- */

struct v_listener {
	struct san_verbs_listener *l;
	ev_io w;
	ev_timer linger;
	int lfd;		    /* the TCP listener it serves; -1 while it lingers */
	struct sockaddr_storage ss; /* where it listens (the TCP listener's address and port) */
	unsigned int calls;	    /* engine calls queued for it (vl_lock): not freed before */
	struct v_req *reqs; /* PROPOSEs waiting for the application's accept() */
	struct v_listener *next;
};

struct v_req {
	ev_timer retry;
	struct v_listener *vl;
	struct san_verbs_request *rq;
	struct v_propose pp;
	int tries;
	struct v_req *next;
};

static pthread_mutex_t vl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct v_listener *vlisteners; /* serving a TCP listener */
static struct v_listener *vlinger;    /* their TCP listener closed: until the linger ends */

static void b_reject(struct san_verbs_request *rq, uint16_t reason)
{
	struct v_reject rj = { .magic = htobe32(V_REJECT_MAGIC), .reason = htobe16(reason) };

	san_debug("verbs: PROPOSE refused (%s)", san_reason_str(reason));
	san_verbs_request_reject(rq, &rj, sizeof(rj));
}

/*
 * Another process of our family serves the connection on rdma_cm @port (san_vredir.h): A is
 * sent there, by a NOT_OWNER that names the port (an older A reads a plain NOT_OWNER).
 */
static void b_redirect(struct san_verbs_request *rq, uint16_t port)
{
	struct v_reject rj = { .magic = htobe32(V_REJECT_MAGIC),
			       .reason = htobe16(SAN_R_NOT_OWNER),
			       .port = htobe16(port) };

	san_debug("verbs: PROPOSE sent to port %u, where its connection is served", (unsigned)port);
	san_verbs_request_reject(rq, &rj, sizeof(rj));
}

/*
 * A's SWITCH: B commits at once (SWITCH back, HELLO) and drains to X_A; its MARK follows its
 * first stream bytes or its end, once they are delivered (mark_try). Lock held.
 */
static void b_commit(struct vconn *v, uint64_t offset)
{
	struct san_sock *s = v->s;
	int r;

	san_sock_commit(s);
	s->tx = SK_TX_SAN;
	s->x_peer = offset;
	s->rx = SK_RX_DRAIN;
	s->mark_due = true;
	/*
	 * Our first RCV_WINDOW, when our application set SO_RCVBUF or SO_SNDBUF (win_tell), just
	 * before the SWITCH: A sends once it has the SWITCH, and must know the bound by then. None
	 * when neither is set, so such a connection's switch-over is what it was before the
	 * message (A's first sends race our HELLO as they did). (Sent from inside the poll, as the
	 * SWITCH.)
	 */
	r = win_tell(v);
	if (r == 0)
		r = send_switch(v, s->tcp_tx);
	v->switch_sent = r == 0;
	if (r == 0) {
		if (s->peer_caps) /* (as A: an older build's PROPOSE offers no bulk) */
			v_bulk_setup(v);
		r = san_conn_send_hello(s) < 0 ? -EIO : 0;
	}
	if (r < 0)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_CHANNEL);
	if (!s->proc->closing)
		san_sock_epoll_rearm_paused(s);
	pthread_cond_broadcast(&s->cond);
	san_ev.ev_timer_stop(san_engine_loop(), &v->t);
	san_debug("fd %d: committed (B, verbs), peer's X %llu", s->fd, (unsigned long long)offset);
}

/* Answer a PROPOSE whose connection is s (a reference of the caller's). */
static void b_accept(struct v_listener *vl, struct san_verbs_request *rq,
		     const struct v_propose *pp, struct san_sock *s, unsigned int gen)
{
	struct v_accept acc = { .magic = htobe32(V_ACCEPT_MAGIC), .version = SAN_PROTO_VERSION,
				.max_msg = htobe32(V_MAX_MSG) };
	struct san_verbs_conn *c = NULL;
	uint32_t mib = pp->area_mib ? pp->area_mib : 1;
	struct vconn *v;
	bool ok;
	int r;

	/* at most what A proposed (it mapped that much), and what our own setting allows */
	if (mib > SAN_CFG_VERBS_AREA_MAX)
		mib = SAN_CFG_VERBS_AREA_MAX;
	if (san_cfg.verbs_area != SAN_CFG_VERBS_AREA_AUTO && san_cfg.verbs_area < mib)
		mib = san_cfg.verbs_area;
	v = v_new(area_take(mib));

	if (!v) {
		b_reject(rq, SAN_R_RESOURCES);
		return;
	}
	v->b = true;
	san_sock_lock(s);
	ok = !s->dropped && !s->proc->closing && !s->attempted && s->rx == SK_RX_TCP &&
	     s->tx == SK_TX_TCP && !s->ep_overflow && san_sock_counts_ok(s) &&
	     san_sock_fork_gen() == gen && v_attach(v, s) == 0;
	if (ok) {
		/* Pause the reader before ACCEPT exists (§9.2 rule 1): no receive runs past here. */
		s->attempted = true;
		s->rx = SK_RX_PAUSED;
		s->nonce_mine = san_up_nonce();
		s->nonce_peer = be64toh(pp->nonce);
		s->peer_caps = be16toh(pp->caps) & V_CAPS;
		v->win_cap = be16toh(pp->caps) & SAN_CAP_RCV_WINDOW;
		v->peer_marks_late = be16toh(pp->caps) & SAN_CAP_MARK_DELIVERED;
		acc.caps = htobe32(V_CAPS | SAN_CAP_RCV_WINDOW | SAN_CAP_MARK_DELIVERED);
		acc.nonce = htobe64(s->nonce_mine);
		acc.area_mib = (uint8_t)(v->bulk / V_MIB);
		san_debug("fd %d: verbs: bulk area %zu MiB each way (%u proposed)", s->fd,
			  v->bulk / V_MIB, (unsigned int)pp->area_mib);
	}
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		v_free(v);
		b_reject(rq, SAN_R_STATE);
		return;
	}
	/* no wait for ESTABLISHED here: it comes on the CM fd the engine watches (v_watch) */
	r = san_verbs_request_accept(vl->l, rq, 0, &c, &acc, sizeof(acc));
	san_sock_lock(s);
	v->c = c;
	if (r < 0) {
		s->pv = NULL;
		pthread_mutex_unlock(&s->lock);
		san_info("fd %d: verbs: accepting the peer's connection failed (%s): it stays on "
			 "TCP", s->fd, strerror(-r));
		/* s->map and X are the sock's now: the fallback undoes them */
		v->s = NULL;
		v_free(v);
		san_up_b_fallback(s, r == -ENOMEM || r == -EPERM ? SAN_R_RESOURCES : SAN_R_PROVIDER);
		san_sock_put(s); /* v_attach's */
		return;
	}
	pthread_mutex_unlock(&s->lock);
	v_watch(v);
}

static void b_req_free(struct v_req *q)
{
	struct v_req **pp;

	for (pp = &q->vl->reqs; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	san_ev.ev_timer_stop(san_engine_loop(), &q->retry);
	free(q);
}

/* Find the connection; until the application has accepted it, look again in 5 ms ... */
static void b_try(struct v_req *q)
{
	struct san_tuple t = { 0 };
	struct san_sock *s;
	unsigned int gen;
	uint16_t port;
	bool away;
	int held;

	memcpy(t.local.addr, q->pp.dst, 16);
	memcpy(t.peer.addr, q->pp.src, 16);
	t.local.port = be16toh(q->pp.dport);
	t.peer.port = be16toh(q->pp.sport);
	gen = san_sock_fork_gen();
	s = san_sock_find_tuple(&t, NULL);
	/* ... or, a fork having copied it, until the other process has closed its copy */
	held = s ? san_sock_forked_alone(s) : 0;
	/*
	 * Not ours to answer, or not yet: not accepted here (a worker accepted it on our
	 * listener), held by another process too, or not touched since its accept or the fork
	 * (san_sock.h: an accept, fork and close hands it to a child). The process that serves
	 * it names it in the family's table at its first touch, with an rdma_cm listener of its
	 * own: A goes there. Until one does, or this process touches it, look again. (Untouched
	 * and never forked: only in a process that has forked before, a pre-fork server, whose
	 * next fork may hand it to a child; one that never forks takes it at once, as shm takes
	 * A's last proposal, protocol.md §9.8: a server that accepts and reads late, or never
	 * first, would hold A's first data call.)
	 */
	away = !s || held == -EBUSY || (!s->touched && (s->forked || gen));
	port = away ? san_vredir_find(&t) : 0;
	if (port) {
		b_redirect(q->rq, port);
		san_sock_put(s);
		b_req_free(q);
		return;
	}
	if (away && ++q->tries < (gen && (!s || s->forked) ? V_B_FORK_TRIES : V_B_TRIES)) {
		san_sock_put(s);
		ev_timer_set(&q->retry, 0.005, 0.);
		san_ev.ev_timer_start(san_engine_loop(), &q->retry);
		return;
	}
	if (!s)
		b_reject(q->rq, SAN_R_NOT_OWNER);
	else if (held || (!s->touched && s->forked))
		b_reject(q->rq, held == -EBUSY ? SAN_R_BUSY : SAN_R_NOT_OWNER);
	else if (san_sock_conf_refuses(s, &t.local))
		b_reject(q->rq, SAN_R_POLICY);
	else
		b_accept(q->vl, q->rq, &q->pp, s, gen);
	san_sock_put(s);
	b_req_free(q);
}

static void b_retry(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	b_try((struct v_req *)t);
}

/* The 16-byte (IPv4-mapped) form of a CM address, as the tuple has it. */
static bool addr16(const struct sockaddr_storage *ss, uint8_t out[16])
{
	memset(out, 0, 16);
	if (ss->ss_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
		return true;
	}
	return false;
}

/* Did the request come from the address the PROPOSE names as A's, to the one it names as B's? */
static bool from_tuple(const struct san_verbs_request *rq, const struct v_propose *pp)
{
	struct sockaddr_storage peer, local;
	uint8_t a[16], b[16];

	san_verbs_request_addrs(rq, &peer, &local);
	return addr16(&peer, a) && addr16(&local, b) && !memcmp(a, pp->src, 16) &&
	       !memcmp(b, pp->dst, 16);
}

static void vl_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct v_listener *vl = w->data;

	(void)loop;
	(void)revents;
	for (;;) {
		struct san_verbs_request *rq;
		struct v_propose pp;
		size_t plen = sizeof(pp);
		struct v_req *q;

		if (san_verbs_request_next(vl->l, 0, &rq, &pp, &plen) < 0)
			return;
		if (plen < sizeof(pp) || be32toh(pp.magic) != V_PROPOSE_MAGIC) {
			b_reject(rq, SAN_R_MALFORMED);
			continue;
		}
		if (pp.ver_min > SAN_PROTO_VERSION || pp.ver_max < SAN_PROTO_VERSION) {
			b_reject(rq, SAN_R_VERSION);
			continue;
		}
		if (!from_tuple(rq, &pp)) {
			/* protocol.md §9.3: the CM connection must come from the TCP peer's address */
			b_reject(rq, SAN_R_NOT_OWNER);
			continue;
		}
		q = calloc(1, sizeof(*q));
		if (!q) {
			b_reject(rq, SAN_R_RESOURCES);
			continue;
		}
		ev_init(&q->retry, b_retry);
		q->vl = vl;
		q->rq = rq;
		q->pp = pp;
		q->next = vl->reqs;
		vl->reqs = q;
		b_try(q);
	}
}

static void vl_start(void *arg)
{
	struct v_listener *vl = arg;

	san_ev.ev_io_start(san_engine_loop(), &vl->w);
}

/* Take vl off the list at *head (vl_lock held); false if it is not there. */
static bool vl_unlink(struct v_listener **head, struct v_listener *vl)
{
	for (struct v_listener **pp = head; *pp; pp = &(*pp)->next)
		if (*pp == vl) {
			*pp = vl->next;
			return true;
		}
	return false;
}

static void vl_linger_end(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct v_listener *vl = (struct v_listener *)((char *)t -
						      offsetof(struct v_listener, linger));
	bool gone;

	(void)revents;
	/*
	 * A listener still lingering, with no call for it queued (a queued unlisten arms the
	 * timer again; a revive took it off the list), closes. Its port is free again only once
	 * the rdma_cm listener is closed, so that happens under vl_lock: a v_listen on the same
	 * address either takes it over before this or binds the port after it.
	 */
	pthread_mutex_lock(&vl_lock);
	gone = !vl->calls && vl_unlink(&vlinger, vl);
	if (gone) {
		san_ev.ev_io_stop(loop, &vl->w);
		while (vl->reqs) {
			b_reject(vl->reqs->rq, SAN_R_NOT_OWNER);
			b_req_free(vl->reqs);
		}
		san_verbs_listener_close(vl->l);
	}
	pthread_mutex_unlock(&vl_lock);
	if (gone)
		free(vl);
}

static void vl_unlisten_on_engine(void *arg)
{
	struct v_listener *vl = arg;

	pthread_mutex_lock(&vl_lock);
	vl->calls--;
	pthread_mutex_unlock(&vl_lock);
	/* (a revive queued before this call may have run already: its timer must not be live) */
	san_ev.ev_timer_stop(san_engine_loop(), &vl->linger);
	ev_timer_init(&vl->linger, vl_linger_end, V_LINGER_S, 0.);
	san_ev.ev_timer_start(san_engine_loop(), &vl->linger);
}

static void vl_revive_on_engine(void *arg)
{
	struct v_listener *vl = arg;

	pthread_mutex_lock(&vl_lock);
	vl->calls--;
	pthread_mutex_unlock(&vl_lock);
	/* (started by the call before this one) */
	san_ev.ev_timer_stop(san_engine_loop(), &vl->linger);
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			       &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr)) &&
		       ((const struct sockaddr_in *)a)->sin_port ==
			       ((const struct sockaddr_in *)b)->sin_port;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) &&
	       ((const struct sockaddr_in6 *)a)->sin6_port ==
		       ((const struct sockaddr_in6 *)b)->sin6_port;
}

/*
 * A program that closes its listener and listens again on the same address (iperf3's server
 * does, between tests) finds our rdma_cm listener for it still lingering, holding the port in
 * the RDMA port space: a new one would fail (EADDRINUSE) and every connection to the new TCP
 * listener would stay on TCP. So the lingering one serves the new listener. True if one did.
 */
static bool vl_revive(int lfd, const struct sockaddr_storage *ss)
{
	struct v_listener *vl;

	pthread_mutex_lock(&vl_lock);
	for (vl = vlinger; vl; vl = vl->next)
		if (same_addr(&vl->ss, ss))
			break;
	if (vl) {
		/* (vl_linger_end, if it runs before the call below, finds it gone from vlinger) */
		vl_unlink(&vlinger, vl);
		vl->lfd = lfd;
		vl->next = vlisteners;
		vlisteners = vl;
		vl->calls++;
	}
	pthread_mutex_unlock(&vl_lock);
	if (vl && san_engine_call(vl_revive_on_engine, vl) < 0) {
		/* (its timer, if it fires, finds it listed as serving again and leaves it) */
		pthread_mutex_lock(&vl_lock);
		vl->calls--;
		pthread_mutex_unlock(&vl_lock);
	}
	return vl != NULL;
}

/* An rdma_cm listener on the TCP listener's address and port (RDMA_PS_TCP). */
static int v_listen(int lfd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "";
	struct v_listener *vl;
	uint16_t port;
	int r;

	if (v_absent)
		return -ENODEV;
	if (getsockname(lfd, (struct sockaddr *)&ss, &sl) < 0)
		return -errno;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	} else {
		return -EAFNOSUPPORT;
	}
	if (vl_revive(lfd, &ss)) {
		san_debug("fd %d: verbs listener on %s port %u (the one that lingered there)", lfd,
			  host, (unsigned)port);
		return 0;
	}
	vl = calloc(1, sizeof(*vl));
	if (!vl)
		return -ENOMEM;
	vl->ss = ss;
	san_fd_guard_enter();
	r = san_verbs_listen(host, port, &v_params, &vl->l);
	san_fd_guard_leave();
	if (r < 0) {
		free(vl);
		if (v_absent_errno(r)) {
			if (!v_absent)
				san_debug("verbs: no rdma_cm here (%s): listeners stay off verbs",
					  strerror(-r));
			v_absent = 1;
		} else {
			san_info("verbs: listener on %s port %u: %s: connections to it stay off verbs",
				 host, (unsigned)port, strerror(-r));
		}
		return r;
	}
	/* before any fork: the workers and children name their connections there (v_name_conn) */
	(void)san_vredir_init();
	vl->lfd = lfd;
	ev_io_init(&vl->w, vl_read, san_verbs_listener_fd(vl->l), EV_READ);
	vl->w.data = vl;
	pthread_mutex_lock(&vl_lock);
	vl->next = vlisteners;
	vlisteners = vl;
	pthread_mutex_unlock(&vl_lock);
	r = san_engine_call(vl_start, vl);
	if (r < 0)
		return r; /* the entry stays listed; unlisten frees it without an engine */
	san_debug("fd %d: verbs listener on %s port %u", lfd, host, (unsigned)port);
	return 0;
}

static void v_unlisten(int lfd)
{
	struct v_listener **pp, *vl = NULL;

	pthread_mutex_lock(&vl_lock);
	for (pp = &vlisteners; *pp; pp = &(*pp)->next)
		if ((*pp)->lfd == lfd) {
			vl = *pp;
			*pp = vl->next;
			vl->lfd = -1;
			vl->next = vlinger;
			vlinger = vl;
			vl->calls++;
			break;
		}
	pthread_mutex_unlock(&vl_lock);
	if (vl && san_engine_call(vl_unlisten_on_engine, vl) < 0) {
		bool ours;

		pthread_mutex_lock(&vl_lock);
		vl->calls--;
		/* (unless a new listener took it back meanwhile, or an earlier call is queued) */
		ours = !vl->calls && vl_unlink(&vlinger, vl);
		if (ours)
			san_verbs_listener_close(vl->l);
		pthread_mutex_unlock(&vl_lock);
		if (ours)
			free(vl);
	}
}

/* ---- B in a worker or a fork child: a listener of its own ---------------------------------- */

static struct v_listener *vown; /* this process's own listeners, one per address (vl_lock) */

/* Does one of this process's listeners get the PROPOSEs for connections to @a? */
static bool v_serves(const struct san_addr *a)
{
	bool r = false;

	pthread_mutex_lock(&vl_lock);
	for (struct v_listener *vl = vlisteners; vl && !r; vl = vl->next) {
		struct san_addr at;

		r = san_owner_addr((const struct sockaddr *)&vl->ss, sizeof(vl->ss), &at) == 0 &&
		    at.port == a->port &&
		    (!memcmp(at.addr, a->addr, 16) || !memcmp(at.addr, in6addr_any.s6_addr, 16) ||
		     !memcmp(at.addr + 10, "\xff\xff\0\0\0\0", 6));
	}
	pthread_mutex_unlock(&vl_lock);
	return r;
}

/*
 * This process's own rdma_cm listener on address @a (a free port, kept for the process's
 * life: the connections of one worker come and go): its port, or 0. Made at the first need.
 */
static uint16_t v_own_port(const struct san_addr *a)
{
	char host[INET6_ADDRSTRLEN];
	struct v_listener *vl;
	uint8_t at[16];
	uint16_t port = 0;
	int r;

	pthread_mutex_lock(&vl_lock);
	for (vl = vown; vl; vl = vl->next)
		if (addr16(&vl->ss, at) && !memcmp(at, a->addr, 16)) {
			port = san_verbs_listener_port(vl->l);
			break;
		}
	pthread_mutex_unlock(&vl_lock);
	if (vl)
		return port;
	vl = calloc(1, sizeof(*vl));
	if (!vl)
		return 0;
	addr_str(a, host, sizeof(host));
	san_fd_guard_enter();
	r = san_verbs_listen(host, 0, &v_params, &vl->l);
	san_fd_guard_leave();
	port = r < 0 ? 0 : san_verbs_listener_port(vl->l);
	if (!port) {
		san_info("verbs: no listener of this process's own on %s (%s): connections it "
			 "did not accept itself stay on TCP", host, r < 0 ? strerror(-r) : "no port");
		san_verbs_listener_close(vl->l);
		free(vl);
		return 0;
	}
	vl->lfd = -1;
	if (san_addr_is_v4(a)) {
		struct sockaddr_in *in = (struct sockaddr_in *)&vl->ss;

		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, a->addr + 12, 4);
		in->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&vl->ss;

		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, a->addr, 16);
		in6->sin6_port = htons(port);
	}
	ev_io_init(&vl->w, vl_read, san_verbs_listener_fd(vl->l), EV_READ);
	vl->w.data = vl;
	if (san_engine_call(vl_start, vl) < 0) {
		san_verbs_listener_close(vl->l);
		free(vl);
		return 0;
	}
	pthread_mutex_lock(&vl_lock);
	vl->next = vown;
	vown = vl;
	pthread_mutex_unlock(&vl_lock);
	san_debug("verbs: this process's own listener on %s port %u", host, (unsigned)port);
	return port;
}

/*
 * B's first touch of s here. A PROPOSE goes to the listener of the process that called
 * listen(): when that is not this one (a worker accepting on its parent's listener; a fork
 * child serving what its parent accepted), this process listens on a port of its own and
 * names the connection in the family's table, where that listener finds it (b_try).
 */
static void v_name_conn(struct san_sock *s)
{
	uint16_t port;

	if (v_absent || !san_vredir_ready() || !san_sock_tuple(s) || v_serves(&s->tuple.local))
		return;
	port = v_own_port(&s->tuple.local);
	if (port && san_vredir_put(&s->tuple, port) == 0) {
		s->proc->vnamed = true;
		san_debug("fd %d: verbs: served here, on port %u", s->fd, (unsigned)port);
	}
}

/* fork() child: the parent's listeners are the parent's (their CM state is not ours). */
static void v_atfork_child(void)
{
	pthread_mutex_init(&vl_lock, NULL);
	pthread_mutex_init(&deaf_lock, NULL);
	pthread_mutex_init(&run_lock, NULL);
	/*
	 * The parent's connections are orphans here (ECONNRESET): their TCP sockets must not stay
	 * open for this child's whole life through our dups (the parent keeps its own).
	 */
	for (struct vconn *v = running; v; v = v->run_next)
		if (v->anchor >= 0) {
			san_sys_close(v->anchor);
			v->anchor = -1;
		}
	running = NULL; /* the parent's: not to be polled here */
	atomic_store(&nrunning, 0);
	atomic_store(&v_nunarmed, 0); /* (the parent's) */
	atomic_store(&v_sleepers, 0); /* (the parent's other threads, not here) */
	v_arm_loop = NULL;	      /* (the parent's: this process builds its own, maybe there) */
	/* (the orphans are never freed here, and this process has pinned nothing yet) */
	atomic_store(&area_extra, 0);
	atomic_store(&rc_pinned, 0);
	vlisteners = vlinger = vown = NULL; /* leaked in the child on purpose: closing would
					     * touch the parent's */
}

const struct san_prov_ops san_prov_verbs = {
	.name = "verbs",
	.wire = SAN_PROV_VERBS,
	.listen = v_listen,
	.unlisten = v_unlisten,
	.atfork_child = v_atfork_child,
	.name_conn = v_name_conn,
	.propose = v_propose,
	.ring_peer = v_ring_peer,
	.wake_producer = v_wake_producer,
	.bulk_copy = v_bulk_copy,
	.bulk_push = v_bulk_push,
	.area_key = v_area_key,
	.area_released = v_area_released,
	.area_arm = v_area_arm,
	.peer_read_to = v_peer_read_to,
	.peer_read_arm = v_peer_read_arm,
	.rcv_window_set = v_rcv_window_set,
	.xfer_done = v_xfer_done,
	.grant_keys = true,
	.progress = v_progress_op,
	.peer_said_end = v_peer_said_end,
	.hold_reset = v_hold_reset,
	.closed = v_closed,
	.spin_poll = v_spin_poll,
	.mark_after = v_mark_after,
	.mark_read = v_mark_read,
	.absent = v_absent_op,
};
