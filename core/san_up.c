/* core — the upgrade over the shm side channel: A in its first data call, B on the engine. */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "core/san_config.h"
#include "core/san_shm_switch.h"
#include "core/san_engine.h"
#include "core/san_ev.h"
#include "core/san_fdtable.h"
#include "core/san_lite.h"
#include "core/san_log.h"
#include "core/san_sidechan.h"
#include "core/san_sig.h"
#include "core/san_sock.h"
#include "core/san_stats.h"
#include "core/san_stats_conn.h"
#include "core/san_sys.h"
#include "proto/san_msg.h"
#include "proto/san_upgrade.h"

/*
 * Provider parameters of shm in PROPOSE and ACCEPT (host order: both ends are on this host).
 * PROPOSE passes the memfd holding both rings (ring 0: A to B, ring 1: B to A) and both bulk
 * areas (area 0: A's READ regions, area 1: B's), ACCEPT passes B's doorbell socket Y_B, A's
 * SWITCH passes Y_A (docs/protocol.md, shm provider).
 */
struct san_shm_params {
	uint32_t pid;
	int32_t fd_hint;   /* the sender's fd number of its TCP socket (san_owner_prove hint) */
	uint64_t ring_size; /* data bytes of each ring (PROPOSE); 0 in ACCEPT */
	uint64_t bulk_size; /* bytes of each bulk area (PROPOSE; 0: none); 0 in ACCEPT */
};

#define SAN_RING_SIZE (512u * 1024u)
#define SAN_BULK_SIZE (2u * 1024u * 1024u)
/*
 * An empty ring's next frame goes back to its start once the position is this far in
 * (san_shm_ring_prod_rewind): a keep-alive connection's requests and replies stay in its
 * first 32 pages. Until the reader takes the frame after a rewind, a writer has this much of
 * the ring (not all 512 KiB): as much as kernel TCP's default receive buffer.
 */
#define SAN_RING_REWIND (128u * 1024u)
#define SAN_BULK_SIZE_MAX (64u * 1024u * 1024u)
#define SAN_UP_TIMEOUT_MS 1000	 /* A: ACCEPT must come within this */
/*
 * ... when A will propose again if refused (SAN_CAP_RETRIES): a B that answers at once does in
 * well under a millisecond; one that holds the PROPOSE (an older build, waiting for an accept())
 * costs this call no more than this, and the connection another try.
 */
#define SAN_UP_RETRY_TIMEOUT_MS 50
#define SAN_UP_COMMIT_WAIT_MS 5000 /* A: B's SWITCH after ours (B answers at once) */

uint64_t san_up_nonce(void)
{
	uint64_t n = 0;

	while (!n)
		if (getrandom(&n, sizeof(n), 0) != sizeof(n))
			n = (uint64_t)san_sock_now_ms() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	return n;
}

/* The notification pair: X becomes the application's fd at the swap, Y goes to the peer. */
int san_up_pair(int *x, int *y)
{
	int sv[2];
	int r = san_sys_socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv);

	if (r < 0)
		return r;
	/* The smallest send buffer: a few plugs make X unwritable (san_conn_tx_arm). */
	(void)san_sys_setsockopt_int(sv[0], SOL_SOCKET, SO_SNDBUF, 1);
	*x = san_fd_hide(sv[0]);
	*y = san_fd_hide(sv[1]);
	return 0;
}

/*
 * The memfd: ring 0, ring 1, then (page aligned) bulk area 0 and bulk area 1. A sends on ring
 * 0 and places its READ regions in area 0; B the other two.
 */
static size_t rings_len(uint64_t ring_size, uint64_t bulk_size)
{
	size_t one = san_shm_ring_bytes(ring_size);

	return ((2 * one + 4095) & ~(size_t)4095) + 2 * bulk_size;
}

/* The memfd's size checked (or set and sealed) and mapped: the system calls of map_rings. */
static int map_memfd(int memfd, uint64_t ring_size, uint64_t bulk_size, bool creator,
		     uint8_t **basep)
{
	size_t len = rings_len(ring_size, bulk_size);
	struct stat st;
	uint8_t *base;

	if (ring_size < SAN_SHM_RING_MIN || ring_size > 64u * 1024 * 1024 ||
	    (ring_size & (ring_size - 1)))
		return -EPROTO;
	if (bulk_size > SAN_BULK_SIZE_MAX || (bulk_size & 4095))
		return -EPROTO;
	/*
	 * The size is sealed: a peer that could shrink the file would make our next access to
	 * the mapping fault (SIGBUS). The accepter maps only a sealed memfd of the right size.
	 */
	if (creator) {
		if (ftruncate(memfd, (off_t)len) < 0 ||
		    san_sys_fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
			return -EPERM;
	} else {
		int seals = san_sys_fcntl(memfd, F_GET_SEALS, 0);

		if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) !=
					 (F_SEAL_SHRINK | F_SEAL_SEAL) ||
		    fstat(memfd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < len)
			return -EPROTO;
	}
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (base == MAP_FAILED)
		return -errno;
	*basep = base;
	return 0;
}

/* The mapping made the connection's: its rings attached (no system call: under the lock). */
static int attach_rings(struct san_sock *s, uint8_t *base, uint64_t ring_size,
			uint64_t bulk_size, bool creator, bool a)
{
	size_t one = san_shm_ring_bytes(ring_size);
	size_t bulk_off = (2 * one + 4095) & ~(size_t)4095;
	size_t len = bulk_off + 2 * bulk_size;
	int r;

	s->map = base;
	s->map_len = len;
	if (bulk_size) {
		s->bulk_tx = base + bulk_off + (a ? 0 : bulk_size);
		s->bulk_rx = base + bulk_off + (a ? bulk_size : 0);
	}
	s->bulk_size = bulk_size;
	san_stage_init(&s->stage, bulk_size);
	if (creator && (san_shm_ring_init(base, one, ring_size) < 0 ||
			san_shm_ring_init(base + one, one, ring_size) < 0))
		return -EINVAL;
	r = san_shm_ring_prod_attach(&s->txr, a ? base : base + one, one, 0);
	if (!r)
		san_shm_ring_prod_rewind(&s->txr, SAN_RING_REWIND);
	if (!r)
		r = san_shm_ring_cons_attach(&s->rxr, a ? base + one : base, one, 0);
	if (!r)
		s->rxr.unhashed_ok = true; /* (both ends say SAN_CAP_UNHASHED at the handshake) */
	if (!r && s->want_edges)
		san_shm_ring_cons_edges(&s->rxr, true);
	return r;
}

static int map_rings(struct san_sock *s, int memfd, uint64_t ring_size, uint64_t bulk_size,
		     bool creator, bool a)
{
	uint8_t *base;
	int r = map_memfd(memfd, ring_size, bulk_size, creator, &base);

	return r < 0 ? r : attach_rings(s, base, ring_size, bulk_size, creator, a);
}

/*
 * How to prove the sender of rx (§9.3): by its fd table; by its user where that table is closed
 * to us, only when it is another user's process and SANSWITCH_OTHER_USERS allows it. Between two
 * processes of one user a closed table (a non-dumpable process) stays a failure: the proof by
 * user would let any process of ours, made non-dumpable on purpose, answer for a connection.
 */
static void proof_of(struct san_owner_proof *pf, const struct san_side_rx *rx, int32_t fd_hint)
{
	memset(pf, 0, sizeof(*pf));
	pf->pid = rx->cred.pid;
	pf->pidfd = rx->pidfd;
	pf->fd_hint = fd_hint;
	pf->uid = rx->cred.uid;
	if (san_cfg.other_users && rx->cred.uid != geteuid())
		pf->flags = SAN_OWNER_F_UID;
}

/*
 * A peer of another user (§9.3): neither process may read or write the other's memory
 * (process_vm_readv/writev need ptrace rights), so the one-copy paths are off from the start
 * instead of failing at their first try; bulk data goes through the shared areas. Root could
 * reach its peer, but not be reached: not worth a one-way case.
 */
static void cma_for_peer(struct san_sock *s, uid_t peer_uid)
{
	if (peer_uid != geteuid())
		s->direct_off = s->src_off = true;
}

static void san_up_unmap(struct san_sock *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	s->map = NULL;
	s->bulk_tx = s->bulk_rx = NULL;
	s->bulk_size = 0;
	memset(&s->txr, 0, sizeof(s->txr));
	memset(&s->rxr, 0, sizeof(s->rxr));
}

/* Before commit: the rings, the notification sockets and the preparation go. Lock held. */
static void up_undo(struct san_sock *s)
{
	san_up_unmap(s);
	if (s->xfd >= 0)
		san_sys_close(s->xfd);
	if (s->ylocal >= 0)
		san_sys_close(s->ylocal);
	if (s->ypeer >= 0)
		san_sys_close(s->ypeer);
	s->xfd = s->ylocal = s->ypeer = -1;
	san_sock_prep_end(s);
}

/* Before commit: undo everything, the connection stays on TCP with @reason. Lock held. 0. */
int san_up_fallback(struct san_sock *s, unsigned int reason)
{
	if (s->side >= 0)
		san_sys_close(s->side);
	s->side = -1;
	up_undo(s);
	if ((reason == SAN_R_NOT_OWNER || reason == SAN_R_BUSY || reason == SAN_R_TIMEOUT) &&
	    san_sock_retry_later(s))
		return 0;
	san_sock_drop(s, reason);
	return 0;
}

/*
 * Wait for one side-channel message, timeout_ms in all (signals do not start it again);
 * -ETIMEDOUT, or san_sidechan_recv()'s result.
 */
static int side_wait(int fd, struct san_side_rx *rx, bool want_fd, int timeout_ms)
{
	uint64_t end = san_sock_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		uint64_t now = san_sock_now_ns();
		int r = san_sys_poll(&p, 1, now >= end ? 0 : (int)((end - now + 999999) / 1000000));

		if (r == 0)
			return -ETIMEDOUT;
		if (r == -EINTR)
			san_sig_note_eintr(); /* the application's call would have ended: san_sig.h */
		else if (r < 0)
			return r;
		r = san_sidechan_recv(fd, rx, want_fd);
		if (r != -EAGAIN)
			return r;
	}
}

static void side_abort(int fd, uint16_t reason)
{
	struct san_msg m = { .type = SAN_T_ABORT };

	m.u.abort.reason = reason;
	(void)san_sidechan_send(fd, &m, -1);
}

/*
 * (san_sock.h) Send what TCP holds back now: the MARK is the last thing we write on TCP, and the peer reads
 * nothing of the ring until it has it. An application that corks its socket (nginx's
 * tcp_nopush, around sendfile) would keep it up to 200 ms, the kernel's cork timeout, while
 * the ring and area fill and its sends wait (a 50 MiB download: 0.24 s instead of 0.03); Nagle
 * would keep it until TCP's last segment was acknowledged. Setting TCP_NODELAY pushes past
 * both; the application's settings are put back as they were.
 */
void san_up_tcp_push(int tcp)
{
	int nodelay = san_sys_getsockopt_int(tcp, IPPROTO_TCP, TCP_NODELAY), cork;

	if (nodelay == 0) {
		(void)san_sys_setsockopt_int(tcp, IPPROTO_TCP, TCP_NODELAY, 1);
		(void)san_sys_setsockopt_int(tcp, IPPROTO_TCP, TCP_NODELAY, 0);
	} else if (nodelay > 0 && (cork = san_sys_getsockopt_int(tcp, IPPROTO_TCP, TCP_CORK)) > 0) {
		(void)san_sys_setsockopt_int(tcp, IPPROTO_TCP, TCP_CORK, 0);
		(void)san_sys_setsockopt_int(tcp, IPPROTO_TCP, TCP_CORK, cork);
	}
}

/* (san_sock.h) */
int san_up_write_mark(struct san_sock *s, int tcp)
{
	uint8_t mark[SAN_MARK_LEN];

	san_mark_encode(mark, SAN_PROTO_VERSION, s->nonce_peer);
	if (!s->mark_out && s->txr.sh)
		/* what the MARK's arrival tells the peer's edge-triggered wait of (san_shm_ring.h) */
		atomic_store_explicit(&s->txr.sh->mark_prod,
				      atomic_load_explicit(&s->txr.sh->prod, memory_order_relaxed) + 1,
				      memory_order_release);
	while (s->mark_out < SAN_MARK_LEN) {
		long r = san_sys_send(tcp, mark + s->mark_out, SAN_MARK_LEN - s->mark_out,
				      MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r > 0) {
			s->mark_out += (unsigned int)r;
			continue;
		}
		if (r != -EINTR)
			return (int)r; /* -EAGAIN: full; or the error */
	}
	san_up_tcp_push(tcp);
	return 0;
}

/*
 * A: the whole upgrade, in the application's data call that finds the connection due
 * (sock_before_io; the first one with SANSWITCH_SWITCH_AFTER 0). The lock is held throughout:
 * no receive or send of another thread runs meanwhile, so the reader is paused at R_A = tcp_rx
 * and X_A = tcp_tx. The steps and their order are protocol.md §9.1; failures before commit
 * fall back.
 */
/*
 * A's PROPOSE of the rings in memfd (passed with it) for the connection t (as A sees it), its
 * MARK's nonce, and caps beyond what every shm A says: it can read B's area and write into
 * B's grant (its HELLO says so again, or clears). san_sidechan_send's result.
 */
static int propose_send(int side, int memfd, int fd_hint, uint64_t nonce,
			const struct san_tuple *t, uint32_t caps)
{
	struct san_shm_params prm = { 0 };
	struct san_msg m = { .type = SAN_T_PROPOSE };

	prm.pid = (uint32_t)getpid();
	prm.fd_hint = fd_hint;
	prm.ring_size = SAN_RING_SIZE;
	prm.bulk_size = SAN_BULK_SIZE;
	m.u.propose.ver_min = m.u.propose.ver_max = SAN_PROTO_VERSION;
	m.u.propose.provider = SAN_PROV_SHM;
	m.u.propose.caps = SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE | SAN_CAP_DIRECT_READ |
			   SAN_CAP_UNHASHED | caps;
	m.u.propose.nonce = nonce;
	m.u.propose.src = t->local;
	m.u.propose.dst = t->peer;
	m.u.propose.params = &prm;
	m.u.propose.params_len = sizeof(prm);
	return san_sidechan_send(side, &m, memfd);
}

static int a_prepare(struct san_sock *s, uint64_t netns);

int san_up_a_run(struct san_sock *s)
{
	struct san_side_rx rx = { .fd = -1, .pidfd = -1 };
	struct san_shm_params prm = { 0 };
	struct san_sidechan_name names[1 + SAN_SIDECHAN_DEST_NAMES];
	struct san_msg m = { 0 };
	uint64_t netns;
	int memfd = -1, y = -1, r, nnames, which = 0;
	struct san_owner_rows rows;
	bool rows_ahead, retries;
	uint16_t gone;

	r = san_owner_tuple(s->fd, &s->tuple);
	if (r == -ENOTCONN)
		return 0; /* a nonblocking connect still in progress: at the next call */
	s->attempted = true;
	if (s->ep_overflow)
		return san_up_fallback(s, SAN_R_STATE);
	if (r < 0 || san_sidechan_netns_fd(s->fd, &netns) < 0)
		return san_up_fallback(s, SAN_FB_NO_PROVIDER);
	if (san_fault(SAN_FAULT_SIDE_REFUSE))
		return SAN_PROV_NO_PEER;
	/* (a peer elsewhere: the paused switch-over, which goes on to verbs if shm finds none) */
	if (san_cfg.nopause && san_sock_peer_on_host(s))
		return a_prepare(s, netns);
	/*
	 * The connection's own name first (B in a worker: san_up_name_conn), then the listener's,
	 * all tried on one socket (a refused AF_UNIX connect leaves it as it was).
	 */
	nnames = san_sidechan_name_conn(&names[0], netns, &s->tuple.peer, &s->tuple.local) == 0;
	r = san_sidechan_dest_names(&s->tuple.peer, netns, names + nnames);
	s->side = r < 0 ? r : san_sidechan_connect_first(names, nnames + r, &which);
	/*
	 * The connection's own name answered: a channel that ends before any answer is a holder
	 * letting go of it (a process that handed it over at exec closes its name as it closes
	 * its copies; the next holder binds it again: san_up_name_conn), not a broken peer: A
	 * proposes again later, as when told NOT_OWNER.
	 */
	gone = s->side >= 0 && nnames && which == 0 ? SAN_R_NOT_OWNER : SAN_R_CHANNEL;
	s->side = san_fd_hide(s->side);
	if (s->side == -ECONNREFUSED) {
		s->side = -1;
		return SAN_PROV_NO_PEER; /* nobody here: the peer is elsewhere, or without the switch */
	}
	if (s->side < 0)
		return san_up_fallback(s, SAN_R_CHANNEL);

	memfd = memfd_create("sanswitch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0 || map_rings(s, memfd, SAN_RING_SIZE, SAN_BULK_SIZE, true, true) < 0) {
		if (memfd >= 0)
			san_sys_close(memfd);
		return san_up_fallback(s, SAN_R_RESOURCES);
	}
	s->nonce_mine = san_up_nonce();
	retries = san_sock_may_retry(s);
	r = propose_send(s->side, memfd, s->fd, s->nonce_mine, &s->tuple,
			 retries ? SAN_CAP_RETRIES : 0);
	san_sys_close(memfd);
	if (r < 0)
		return san_up_fallback(s, r == -EPIPE || r == -ECONNRESET ? gone : SAN_R_CHANNEL);
	/*
	 * While B proves us (a third of the handshake's time): what needs nothing of its answer.
	 * The notification pair, and the lookup half of our proof of B (the rows of both TCP ends:
	 * B has accepted by now unless A proposes at once, SANSWITCH_SWITCH_AFTER=0; a lookup
	 * that finds no row yet is made again with the rest of the proof).
	 */
	if (san_up_pair(&s->xfd, &y) < 0) {
		side_abort(s->side, SAN_R_RESOURCES);
		return san_up_fallback(s, SAN_R_RESOURCES);
	}
	s->ylocal = y;
	rows_ahead = san_owner_rows_find(s->fd, &s->tuple, 0, &rows) == 0;

	r = side_wait(s->side, &rx, true, retries ? SAN_UP_RETRY_TIMEOUT_MS : SAN_UP_TIMEOUT_MS);
	if (r == -ETIMEDOUT) {
		side_abort(s->side, SAN_R_TIMEOUT);
		return san_up_fallback(s, SAN_R_TIMEOUT);
	}
	if (r < 0)
		return san_up_fallback(s, r == -EPIPE || r == -ECONNRESET ? gone : SAN_R_MALFORMED);
	if (rx.msg.type == SAN_T_REJECT) {
		san_side_rx_close_fds(&rx);
		return san_up_fallback(s, rx.msg.u.reject.reason);
	}
	if (rx.msg.type != SAN_T_ACCEPT || rx.fd < 0 ||
	    rx.msg.u.accept.params_len != sizeof(prm)) {
		san_side_rx_close_fds(&rx);
		side_abort(s->side, SAN_R_MALFORMED);
		return san_up_fallback(s, SAN_R_MALFORMED);
	}
	memcpy(&prm, rx.msg.u.accept.params, sizeof(prm));
	{
		struct san_owner_proof pf;

		proof_of(&pf, &rx, prm.fd_hint);
		pf.own = &s->tuple; /* asked at the start, under the lock held since */
		pf.rows = rows_ahead ? &rows : NULL;

		/* An abstract name can be bound by anyone: prove B before writing a MARK. */
		if (san_owner_check_cred(&rx.cred) < 0 || san_owner_prove(s->fd, &pf) < 0) {
			san_side_rx_close_fds(&rx);
			side_abort(s->side, SAN_R_CREDENTIALS);
			return san_up_fallback(s, SAN_R_CREDENTIALS);
		}
	}
	s->ypeer = san_fd_hide(rx.fd);
	rx.fd = -1;
	/*
	 * B's pidfd served the proof only: kept, it would turn on the direct read of B's buffers
	 * on this side too (san_conn.c: HELLO's SAN_CAP_DIRECT_READ), which B alone does and
	 * is tested for.
	 */
	s->peer_pidfd = -1;
	san_side_rx_close_fds(&rx);
	s->peer_pid = rx.cred.pid;
	cma_for_peer(s, rx.cred.uid);
	s->peer_caps = rx.msg.u.accept.caps; /* its HELLO may clear some */
	/* (the handshake's word alone: our first frame, HELLO, goes before the peer's HELLO) */
	s->txr.unhashed = (s->peer_caps & SAN_CAP_UNHASHED) != 0;
	s->nonce_peer = rx.msg.u.accept.nonce;

	/*
	 * ---- SWITCH{X_A}, then commit on B's SWITCH: the SAN; the MARK goes with our first
	 * stream bytes or our end (san_sock_mark_flush). ----
	 */
	if (san_fault(SAN_FAULT_SWITCH_LATE))
		usleep(500 * 1000);
	memset(&m, 0, sizeof(m));
	m.type = SAN_T_SWITCH;
	m.u.sw.offset = s->tcp_tx;
	if (san_sidechan_send(s->side, &m, s->ylocal) < 0)
		return san_up_fallback(s, SAN_R_CHANNEL); /* NOT_SENT: B sees EOF, resumes */
	/*
	 * Until B's SWITCH nothing of ours is anywhere but on TCP (the lock, held since the
	 * start, holds the application's calls; our MARK waits for our first stream bytes). So
	 * a B that lets go without committing (its application closed the connection before
	 * our SWITCH came: §9.2 rule 4) leaves the whole connection on TCP, where its data and
	 * its FIN already are: a channel ending without B's SWITCH (which it would have sent
	 * first: the channel gives what was sent before its end) is a fallback, not a reset.
	 * No answer in time is a reset: B may commit yet.
	 */
	r = side_wait(s->side, &rx, false, SAN_UP_COMMIT_WAIT_MS);
	if (r == -ECONNRESET)
		/*
		 * (the channel's error comes before the messages queued behind it, and is told
		 * once: B's SWITCH, if it sent one, is the next read; else its end, -EPIPE)
		 */
		r = san_sidechan_recv(s->side, &rx, false);
	if (!r)
		san_side_rx_close_fds(&rx);
	if (r == -EPIPE || r == -ECONNRESET || r == -EAGAIN)
		return san_up_fallback(s, SAN_R_STATE);
	san_sock_commit(s);
	if (r < 0 || rx.msg.type != SAN_T_SWITCH) {
		san_sock_reset_locked(s, -ECONNRESET,
				      r == -ETIMEDOUT ? SAN_R_TIMEOUT
				      : r < 0	      ? SAN_R_CHANNEL
							      : SAN_R_PROTOCOL);
		return 0;
	}
	s->tx = SK_TX_SAN;
	s->mark_due = true;
	if (san_conn_send_hello(s) < 0) {
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
		return 0;
	}
	san_sys_close(s->side);
	s->side = -1;
	s->x_peer = rx.msg.u.sw.offset;
	s->rx = SK_RX_DRAIN;
	san_debug("fd %d: committed (A), peer's X %llu", s->fd, (unsigned long long)s->x_peer);
	return 0;
}


/* ---- A, without a pause: the handshake on the engine (docs/protocol.md §16) ------------- */

/*
 * The due call sends its bytes on TCP as any other; the engine connects the side channel,
 * maps the rings, proposes, proves B and says SWITCH, which here means "proved: commit when
 * you like". Nothing of it holds the connection's lock but for the moments it changes it.
 */
struct a_prep {
	ev_io w;	    /* the side channel: B's answer */
	ev_timer timer;	    /* ... within this */
	struct san_sock *s; /* a reference */
	int fd;		    /* the application's number when A became due */
	uint64_t netns;
	struct san_tuple tuple;
	uint16_t gone; /* a channel that ends before the answer: as in san_up_a_run */
	bool retries;  /* the PROPOSE says SAN_CAP_RETRIES */
	bool rows_ahead;
	uint64_t t0; /* when A became due (for the debug line) */
	struct san_owner_rows rows;
};

/* Still the connection this handshake began for, and still waiting for it? Lock held. */
static bool a_prep_alive(const struct a_prep *ap)
{
	const struct san_sock *s = ap->s;

	return s->attempted && !s->committed && !s->dropped && !s->err && !s->proc->closing &&
	       s->fd == ap->fd;
}

static void a_prep_free(struct ev_loop *loop, struct a_prep *ap)
{
	if (loop) {
		san_ev.ev_io_stop(loop, &ap->w);
		san_ev.ev_timer_stop(loop, &ap->timer);
	}
	san_sock_put(ap->s);
	free(ap);
}

/* Ended without a preparation: TCP, or a proposal again later (san_up_fallback). */
static void a_prep_fail(struct ev_loop *loop, struct a_prep *ap, unsigned int reason)
{
	struct san_sock *s = ap->s;

	if (loop) {
		san_ev.ev_io_stop(loop, &ap->w);
		san_ev.ev_timer_stop(loop, &ap->timer);
	}
	san_sock_lock(s);
	/* (a connection closed meanwhile lets its side channel and rings go when freed) */
	if (a_prep_alive(ap) && s->prep == SK_PREP_NONE)
		san_up_fallback(s, reason);
	pthread_cond_broadcast(&s->cond); /* (a due call that waits: SANSWITCH_NOPAUSE=2) */
	pthread_mutex_unlock(&s->lock);
	san_debug("fd %d: no pause: the handshake ended (%s), %.0f us after it was due", ap->fd,
		  reason < 32 ? san_reason_str((uint16_t)reason) : san_fb_name(reason),
		  (double)(san_sock_now_ns() - ap->t0) / 1e3);
	a_prep_free(NULL, ap);
}

static void a_prep_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct a_prep *ap = (struct a_prep *)((char *)t - offsetof(struct a_prep, timer));

	side_abort(ap->w.fd, SAN_R_TIMEOUT);
	a_prep_fail(loop, ap, SAN_R_TIMEOUT);
}

/* B's answer: prove B, look at B's word from now on, say SWITCH, then commit when sending. */
static void a_prep_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct a_prep *ap = (struct a_prep *)w;
	struct san_sock *s = ap->s;
	struct san_side_rx rx = { .fd = -1, .pidfd = -1 };
	struct san_shm_params prm;
	struct san_owner_proof pf;
	struct san_msg m = { .type = SAN_T_SWITCH };
	int r = san_sidechan_recv(w->fd, &rx, true);
	bool busy;

	if (r == -EAGAIN)
		return;
	san_ev.ev_io_stop(loop, w);
	if (san_fault(SAN_FAULT_ACCEPT_LATE) && ap->retries && r == 0 &&
	    rx.msg.type == SAN_T_ACCEPT) {
		/* as if its timer had fired first: our ABORT meets a B that answered */
		san_side_rx_close_fds(&rx);
		return;
	}
	san_ev.ev_timer_stop(loop, &ap->timer);
	if (r < 0) {
		a_prep_fail(NULL, ap, r == -EPIPE || r == -ECONNRESET ? ap->gone : SAN_R_MALFORMED);
		return;
	}
	if (rx.msg.type == SAN_T_REJECT) {
		san_side_rx_close_fds(&rx);
		a_prep_fail(NULL, ap, rx.msg.u.reject.reason);
		return;
	}
	if (rx.msg.type != SAN_T_ACCEPT || rx.fd < 0 || rx.msg.u.accept.params_len != sizeof(prm)) {
		san_side_rx_close_fds(&rx);
		side_abort(w->fd, SAN_R_MALFORMED);
		a_prep_fail(NULL, ap, SAN_R_MALFORMED);
		return;
	}
	memcpy(&prm, rx.msg.u.accept.params, sizeof(prm));
	proof_of(&pf, &rx, prm.fd_hint);
	pf.own = &ap->tuple;
	pf.rows = ap->rows_ahead ? &ap->rows : NULL;
	/* An abstract name can be bound by anyone: prove B before anything of B's is trusted. */
	if (san_owner_check_cred(&rx.cred) < 0 || san_owner_prove(ap->fd, &pf) < 0) {
		san_side_rx_close_fds(&rx);
		side_abort(w->fd, SAN_R_CREDENTIALS);
		a_prep_fail(NULL, ap, SAN_R_CREDENTIALS);
		return;
	}
	if (!(rx.msg.u.accept.caps & SAN_CAP_NOPAUSE)) {
		/* a B of an older build, paused for our SWITCH: our ABORT resumes it */
		san_side_rx_close_fds(&rx);
		side_abort(w->fd, SAN_R_VERSION);
		a_prep_fail(NULL, ap, SAN_R_VERSION);
		return;
	}
	san_sock_lock(s);
	/* a receive of ours in the kernel (begun before we were due) would not look: later */
	busy = s->in_kernel > 0;
	/* a fork since we were due: a copy in the child would read without looking */
	if (!a_prep_alive(ap) || busy || s->prep_fork_gen != san_sock_fork_gen()) {
		pthread_mutex_unlock(&s->lock);
		san_side_rx_close_fds(&rx);
		side_abort(w->fd, busy ? SAN_R_BUSY : SAN_R_STATE);
		a_prep_fail(NULL, ap, busy ? SAN_R_BUSY : SAN_R_STATE);
		return;
	}
	s->ypeer = san_fd_hide(rx.fd);
	rx.fd = -1;
	s->peer_pid = rx.cred.pid;
	cma_for_peer(s, rx.cred.uid);
	s->peer_caps = rx.msg.u.accept.caps;
	s->txr.unhashed = (s->peer_caps & SAN_CAP_UNHASHED) != 0;
	s->nonce_peer = rx.msg.u.accept.nonce;
	/* Our reader looks from here: B commits only once it has our SWITCH. */
	san_sock_prep_looking(s);
	san_side_rx_close_fds(&rx);
	/* (under the lock: a reset meanwhile would close our Y, and its number be reused) */
	r = san_sidechan_send(w->fd, &m, s->ylocal);
	if (r < 0) {
		/* B never commits: B's reader lets go too, at the channel's end */
		san_sock_prep_drop(s, SAN_R_CHANNEL);
	} else {
		/* Handed off (§9.4): B's reader looks at our word since its ACCEPT. */
		san_sys_close(s->side);
		s->side = -1;
		san_debug("fd %d: prepared (A, no pause), %.0f us after it was due", s->fd,
			  (double)(san_sock_now_ns() - ap->t0) / 1e3);
		san_sock_prep_ready(s);
	}
	pthread_mutex_unlock(&s->lock);
	a_prep_free(NULL, ap);
}

static void a_prep_start(void *arg)
{
	struct a_prep *ap = arg;
	struct san_sock *s = ap->s;
	struct san_sidechan_name names[1 + SAN_SIDECHAN_DEST_NAMES];
	int side, memfd, x = -1, y = -1, nnames, which = 0, r;
	uint64_t nonce = san_up_nonce();
	uint8_t *base = NULL;
	bool alive;

	ev_io_init(&ap->w, a_prep_read, -1, EV_READ);
	ev_init(&ap->timer, a_prep_timeout);
	nnames = san_sidechan_name_conn(&names[0], ap->netns, &ap->tuple.peer, &ap->tuple.local) == 0;
	r = san_sidechan_dest_names(&ap->tuple.peer, ap->netns, names + nnames);
	side = r < 0 ? r : san_sidechan_connect_first(names, nnames + r, &which);
	ap->gone = side >= 0 && nnames && which == 0 ? SAN_R_NOT_OWNER : SAN_R_CHANNEL;
	side = san_fd_hide(side);
	if (side < 0) {
		/* nobody here: the peer is elsewhere, or without the switch */
		a_prep_fail(NULL, ap, side == -ECONNREFUSED ? SAN_FB_NO_PEER : SAN_R_CHANNEL);
		return;
	}
	memfd = memfd_create("sanswitch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0 || map_memfd(memfd, SAN_RING_SIZE, SAN_BULK_SIZE, true, &base) < 0 ||
	    san_up_pair(&x, &y) < 0) {
		if (base)
			munmap(base, rings_len(SAN_RING_SIZE, SAN_BULK_SIZE));
		if (memfd >= 0)
			san_sys_close(memfd);
		san_sys_close(side);
		a_prep_fail(NULL, ap, SAN_R_RESOURCES);
		return;
	}
	san_sock_lock(s);
	alive = a_prep_alive(ap) && !s->map;
	if (alive) {
		s->side = side;
		s->xfd = x;
		s->ylocal = y;
		s->nonce_mine = nonce;
		r = attach_rings(s, base, SAN_RING_SIZE, SAN_BULK_SIZE, true, true);
	}
	pthread_mutex_unlock(&s->lock);
	if (!alive) {
		munmap(base, rings_len(SAN_RING_SIZE, SAN_BULK_SIZE));
		san_sys_close(memfd);
		san_sys_close(side);
		san_sys_close(x);
		san_sys_close(y);
		a_prep_free(NULL, ap);
		return;
	}
	if (r < 0) {
		san_sys_close(memfd);
		a_prep_fail(NULL, ap, SAN_R_RESOURCES); /* (its fallback lets go of all of it) */
		return;
	}
	r = propose_send(side, memfd, ap->fd, nonce, &ap->tuple,
			 SAN_CAP_NOPAUSE | (ap->retries ? SAN_CAP_RETRIES : 0));
	san_sys_close(memfd);
	if (r < 0) {
		a_prep_fail(NULL, ap, r == -EPIPE || r == -ECONNRESET ? ap->gone : SAN_R_CHANNEL);
		return;
	}
	/* while B proves us: the lookup half of our proof of B (as san_up_a_run) */
	ap->rows_ahead = san_owner_rows_find(ap->fd, &ap->tuple, 0, &ap->rows) == 0;
	ev_io_set(&ap->w, side, EV_READ);
	ev_timer_set(&ap->timer,
		     (ap->retries ? SAN_UP_RETRY_TIMEOUT_MS : SAN_UP_TIMEOUT_MS) / 1000.0, 0.);
	san_ev.ev_io_start(san_engine_loop(), &ap->w);
	san_ev.ev_timer_start(san_engine_loop(), &ap->timer);
}

/* A is due: the handshake goes to the engine, the call on (on TCP). Lock held; 0. */
static int a_prepare(struct san_sock *s, uint64_t netns)
{
	struct a_prep *ap = calloc(1, sizeof(*ap));

	if (!ap)
		return san_up_fallback(s, SAN_R_RESOURCES);
	san_sock_hold(s);
	ap->s = s;
	ap->fd = s->fd;
	ap->netns = netns;
	ap->tuple = s->tuple;
	ap->retries = san_sock_may_retry(s);
	ap->t0 = san_sock_now_ns();
	s->prep_fork_gen = san_sock_fork_gen();
	if (san_engine_call(a_prep_start, ap) < 0) {
		san_sock_put(s); /* (the caller's reference keeps it) */
		free(ap);
		return san_up_fallback(s, SAN_R_RESOURCES);
	}
	san_debug("fd %d: due: the handshake goes on on the engine, the call on TCP", s->fd);
	/*
	 * SANSWITCH_NOPAUSE=2, for tests whose subject is a switched short connection: the due
	 * call waits for the preparation (its end, whatever it is), as the paused switch-over's
	 * does, and the engine's commit at READY puts this call's bytes on the SAN.
	 */
	if (san_cfg.nopause == 2)
		san_up_wait_prepared(s);
	return 0;
}

void san_up_wait_prepared(struct san_sock *s)
{
	for (uint64_t end = san_sock_now_ns() + 3000000000ull;
	     s->prep != SK_PREP_READY && s->attempted && !s->dropped && !s->err &&
	     !s->committed && san_sock_now_ns() < end;)
		san_sock_wait_ms(s, 5);
}

/* ---- B, on the engine thread ------------------------------------------------------------ */

struct side_conn {
	ev_io w;
	ev_timer retry;	  /* B: the PROPOSE came before accept(): look again shortly */
	bool busy_kernel; /* B: ... or met a receive in the kernel (BUSY): b_receive_returns_soon */
	int lite_busy;	  /* B: ... of the lite candidate with this number (san_lite.h), or -1 */
	struct san_side_rx prx; /* that PROPOSE, kept for the retry (owns its fds) */
	int tries;
	int held_late;	    /* B: SANSWITCH_FAULT=accept_late holds the answer: 1 before
			     * b_propose looks, 2 once it prepared, 3 not at all */
	struct san_sock *s; /* after PROPOSE: the connection being upgraded (a reference) */
	int stage;	    /* 0: expect PROPOSE; 1: paused, expect SWITCH; 2: done */
};

static void side_close(struct ev_loop *loop, struct side_conn *c)
{
	san_ev.ev_io_stop(loop, &c->w);
	san_ev.ev_timer_stop(loop, &c->retry);
	if (c->lite_busy >= 0 && !c->s)
		san_lite_undrain(c->lite_busy);
	san_side_rx_close_fds(&c->prx);
	/*
	 * The channel's end for A whoever else holds it: a fork child of ours has a copy of
	 * every open channel, and a close alone would leave A waiting for its 5 s (a let-go of
	 * b_switch's unseen, then a reset on the connection the child serves).
	 */
	(void)san_sys_shutdown(c->w.fd, SHUT_RDWR);
	san_sys_close(c->w.fd);
	san_sock_put(c->s);
	free(c);
}

static void side_reject(int fd, uint16_t reason)
{
	struct san_msg m = { .type = SAN_T_REJECT };

	m.u.reject.reason = reason;
	m.u.reject.ver_min = m.u.reject.ver_max = SAN_PROTO_VERSION;
	(void)san_sidechan_send(fd, &m, -1);
}

/* B's reader resumes and the connection stays TCP. */
void san_up_b_fallback(struct san_sock *s, unsigned int reason)
{

	san_sock_lock(s);
	if (s->prep && !s->committed) {
		/* no pause: our reader lets go of A's word (A committed without SWITCH: a lie) */
		san_sock_prep_drop(s, reason);
	} else if (!s->committed && !s->proc->closing) {
		if (s->rx == SK_RX_PAUSED)
			san_sock_epoll_rearm_paused(s);
		san_up_fallback(s, reason);
	} else if (!s->committed) {
		san_up_fallback(s, reason);
	}
	pthread_mutex_unlock(&s->lock);
}

/* An ABORT's reason after which A proposes again (san_up_fallback: san_sock_retry_later). */
static bool a_tries_again(uint16_t reason)
{
	return reason == SAN_R_TIMEOUT || reason == SAN_R_BUSY || reason == SAN_R_NOT_OWNER;
}

/*
 * A gave up on our answer (its timer fired: a try it makes again later, SAN_CAP_RETRIES)
 * before it committed: our preparation is undone and the connection stays a candidate for
 * that try, where san_up_b_fallback would leave it on TCP for good (A's next try refused
 * STATE). Not once anything committed, or the word says A did (the caller falls back then).
 * True: a candidate again.
 */
static bool b_unprepare(struct san_sock *s, const char *why)
{
	bool ok;

	san_sock_lock(s);
	ok = !s->committed && !s->dropped && !s->err && !s->proc->closing && s->tx == SK_TX_TCP &&
	     (s->prep ? s->rx == SK_RX_TCP && san_sock_prep_withdraw(s, "the proposer gave up") == 0
		      : s->rx == SK_RX_PAUSED);
	if (ok) {
		up_undo(s);
		san_up_unwatch_rx_edges(s);
		if (s->rx == SK_RX_PAUSED) {
			s->rx = SK_RX_TCP;
			san_sock_epoll_rearm_paused(s);
		}
		s->attempted = false;
		s->prov = NULL;
		s->peer_caps = 0;
		/* (the next try may come from another process of A's: b_propose keeps its pidfd) */
		if (s->peer_pidfd >= 0)
			san_sys_close(s->peer_pidfd);
		s->peer_pidfd = -1;
		san_stats_conn_set(s->proc->stc, SAN_CS_CANDIDATE, SAN_CONN_KEEP, 0);
		pthread_cond_broadcast(&s->cond);
		san_debug("fd %d: the proposer gave up on our answer (%s): a candidate again",
			  s->fd, why);
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

/*
 * A PROPOSE names no candidate of ours. Ours all the same, on a number that stays TCP (its
 * window closed: at its end, at a shutdown, or early, once the peer had begun the exchanges in
 * which a switch would have proposed: san_sock.c), it is STATE: this connection will not
 * switch here, and A, told so, stops proposing. NOT_OWNER said another process held it, and A
 * proposed twice more (a full-duplex stream's log read "not owned by the acceptor" of the
 * acceptor's own connection). Another process's, or in the accept queue: NOT_OWNER.
 */
static uint16_t b_not_found(const struct san_tuple *t)
{
	struct san_fd *f;
	uint64_t ino;
	int fd;

	if (san_owner_find_inode(t, &ino) != 0 || (fd = san_owner_pid_fd_of_inode(getpid(), ino)) < 0)
		return SAN_R_NOT_OWNER;
	f = san_fd_get(fd);
	/* (a fork's copy may be another process's candidate: san_forked.h) */
	if (!f || san_fd_state(f) != SAN_FD_CONN ||
	    (san_fd_flags(f) & (SAN_FDF_OPENED | SAN_FDF_FORKED)))
		return SAN_R_NOT_OWNER;
	san_debug("fd %d: PROPOSE for a connection of ours that stays TCP (its window closed)", fd);
	return SAN_R_STATE;
}

/*
 * B's engine keeps one notification pair made ahead, after an ACCEPT has gone (while A proves
 * us), so that the next PROPOSE's answer does not wait for its six system calls. Engine thread
 * only; a fork child closes its copies (san_up_atfork_child).
 */
static int spare_x = -1, spare_y = -1;
static uint64_t spare_ino[2];

/*
 * The inode behind a number we keep between connections: the application may have closed it
 * (close_range, closefrom and dup2 onto our numbers are not all seen) and the number may name
 * one of its files since. Such a number is left alone, never used nor closed.
 */
static uint64_t fd_ino(int fd)
{
	uint64_t ino = 0;

	return fd >= 0 && san_owner_inode(fd, &ino) == 0 ? ino : 0;
}

static int b_pair(int *x, int *y)
{
	bool ours = spare_x >= 0 && fd_ino(spare_x) == spare_ino[0] &&
		    fd_ino(spare_y) == spare_ino[1];

	if (!ours) {
		spare_x = spare_y = -1;
		return san_up_pair(x, y);
	}
	*x = spare_x;
	*y = spare_y;
	spare_x = spare_y = -1;
	return 0;
}

static void b_pair_ahead(void)
{
	if (spare_x >= 0)
		return;
	if (san_up_pair(&spare_x, &spare_y) < 0) {
		spare_x = spare_y = -1;
		return;
	}
	spare_ino[0] = fd_ino(spare_x);
	spare_ino[1] = fd_ino(spare_y);
}

/*
 * And its netlink socket for the proofs' sock_diag lookups, kept open (making one and closing
 * it cost 8 µs of each proof here). Let go after a proof that failed: a lookup cut short could
 * have left a reply in it that the next one would take for its own.
 */
static int engine_diag = -1;
static uint64_t engine_diag_ino;

static int b_diag_fd(void)
{
	if (engine_diag >= 0 && fd_ino(engine_diag) != engine_diag_ino)
		engine_diag = -1; /* (not ours any more: see fd_ino) */
	if (engine_diag < 0) {
		engine_diag = san_fd_hide(san_owner_diag_open());
		engine_diag_ino = fd_ino(engine_diag);
	}
	return engine_diag >= 0 ? engine_diag + 1 : 0;
}

static void b_diag_drop(void)
{
	if (engine_diag >= 0 && fd_ino(engine_diag) == engine_diag_ino)
		san_sys_close(engine_diag);
	engine_diag = -1;
}

/*
 * Has the proposer given up waiting for our answer? It sends nothing between its PROPOSE and
 * our answer but the ABORT it sends as it gives up, then closes its end (which a fork child's
 * copy may keep open: the ABORT says it all the same).
 */
static bool side_peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	return san_sys_poll(&p, 1, 0) == 1;
}

/*
 * SANSWITCH_FAULT=accept_late: hold our answer until A has given up on it (2 s at most: on a
 * loaded host A may be late too, so not for a fixed time). Blocks the engine thread.
 */
static unsigned int accept_late_n;

static void accept_late_hold(int fd, bool until_end)
{
	struct pollfd p = { .fd = fd, .events = until_end ? POLLRDHUP : POLLIN | POLLRDHUP };

	(void)san_sys_poll(&p, 1, 2000);
}

static uint16_t b_propose(struct side_conn *c, struct san_side_rx *rx)
{
	const struct san_propose *p = &rx->msg.u.propose;
	struct san_shm_params prm, mine = { 0 };
	struct san_tuple t;
	struct san_sock *s;
	struct san_msg m = { .type = SAN_T_ACCEPT };
	int x = -1, y = -1, held;
	unsigned int gen;
	bool ok, untouched;

	if (p->ver_min > SAN_PROTO_VERSION || p->ver_max < SAN_PROTO_VERSION)
		return SAN_R_VERSION;
	if (san_prov_by_wire(p->provider) != &san_prov_shm || p->params_len != sizeof(prm) ||
	    rx->fd < 0)
		return SAN_R_PROVIDER;
	memcpy(&prm, p->params, sizeof(prm));
	t.local = p->dst;
	t.peer = p->src;
	if (!c->s) {
		int was = c->lite_busy;

		s = san_sock_find_tuple(&t, &c->lite_busy);
		/*
		 * A try again (BUSY, 1 ms later) that no longer finds the candidate it drained (its
		 * tuple asked again and not given, the number another connection's now) must open
		 * that gate: left draining, its next call would wait for the engine for ever. (A
		 * hang of that form, a server in san_lite_wait_closing, came in 1 loop in 20 of
		 * 3-request connections without a pause, and not since; this is the one path found
		 * that could leave it, not shown to be the one taken.)
		 */
		if (was >= 0 && c->lite_busy != was)
			san_lite_undrain(was);
	} else {
		s = c->s;
	}
	if (!s && c->lite_busy >= 0) {
		c->busy_kernel = true;
		return SAN_R_BUSY; /* a call inside its gate (san_lite_drain), perhaps in the kernel */
	}
	if (!s)
		return b_not_found(&t);
	c->s = s;
	if (san_sock_conf_refuses(s, &t.local))
		return SAN_R_POLICY;
	gen = san_sock_fork_gen();
	san_sock_lock(s);
	ok = !s->in_kernel;
	/*
	 * Accepted, not yet read, waited on or registered: perhaps on its way to a fork child that
	 * will serve it (san_sock.h, san_sock_any_untouched). Refused when A will propose again,
	 * or when the fork has happened; a last proposal for one never forked is taken, as before
	 * (A may be waiting in its first data call for an answer the application's first touch
	 * would come only after: a client's receive of a server's greeting). Never when A is this
	 * process: its one thread may be the one that proposes.
	 */
	untouched = !s->touched && ((p->caps & SAN_CAP_RETRIES) || s->forked) &&
		    rx->cred.pid != getpid();
	pthread_mutex_unlock(&s->lock);
	c->busy_kernel = !ok;
	if (!ok)
		return SAN_R_BUSY; /* a receive in the kernel cannot be paused (sock_direct) */
	if (untouched)
		return SAN_R_NOT_OWNER;
	/*
	 * A fork copied it: only while we hold it alone. Another process holding it (a parent
	 * that has not closed its copy yet, or its child, which will serve it) makes A try again.
	 */
	held = san_sock_forked_alone(s);
	if (held)
		return held == -EBUSY ? SAN_R_BUSY : SAN_R_NOT_OWNER;
	for (int k = 0;; k++) {
		struct san_owner_proof pf;
		struct san_tuple own;
		bool moved;
		int fd;

		san_sock_lock(s);
		fd = s->fd;
		own = s->tuple; /* known: the PROPOSE found it by this tuple */
		pthread_mutex_unlock(&s->lock);
		proof_of(&pf, rx, prm.fd_hint);
		pf.own = &own;
		pf.diag_fd = b_diag_fd();
		if (san_owner_check_cred(&rx->cred) == 0 && san_owner_prove(fd, &pf) == 0)
			break;
		b_diag_drop();
		/*
		 * The number closed under the proof while another names the connection (a dup's
		 * first number closed: san_sock_on_close moved it): prove again, once.
		 */
		san_sock_lock(s);
		moved = k == 0 && s->fd != fd;
		pthread_mutex_unlock(&s->lock);
		if (moved && san_sock_current(s))
			continue;
		/* (our own number closed meanwhile: a forked copy's parent lets go) */
		return san_sock_current(s) ? SAN_R_CREDENTIALS : SAN_R_NOT_OWNER;
	}
	/*
	 * A that stopped waiting for our answer (its ACCEPT timer: 50 ms for a try it repeats
	 * later) has closed its end: an ACCEPT now fails once our reader is prepared, and that
	 * failure leaves the connection on TCP for good, where a refusal leaves it a candidate
	 * for A's next try. Under load this engine thread got its CPU after A's timer (one
	 * connection of t_switch_duplex's 20 stayed TCP, 1 run in 60 with two CPU hogs).
	 */
	if (side_peer_gone(c->w.fd))
		return SAN_R_TIMEOUT;
	if (b_pair(&x, &y) < 0)
		return SAN_R_RESOURCES;
	san_sock_lock(s);
	if (s->in_kernel || san_sock_fork_gen() != gen) {
		/* one began since the check above, or a fork came (a copy the check did not see) */
		c->busy_kernel = s->in_kernel;
		pthread_mutex_unlock(&s->lock);
		san_sys_close(x);
		san_sys_close(y);
		return SAN_R_BUSY;
	}
	if (s->attempted && !s->committed && !s->dropped && !s->err &&
	    (s->prep || s->rx == SK_RX_PAUSED)) {
		/*
		 * Still prepared for A's earlier PROPOSE, whose channel's ABORT or end this loop
		 * has not read yet (b_unprepare): look again in a millisecond, as for a receive.
		 */
		c->busy_kernel = true;
		pthread_mutex_unlock(&s->lock);
		san_sys_close(x);
		san_sys_close(y);
		return SAN_R_BUSY;
	}
	ok = !s->dropped && !s->proc->closing && !s->attempted && s->rx == SK_RX_TCP &&
	     s->tx == SK_TX_TCP && !s->ep_overflow;
	if (ok) {
		int cr = san_sock_counts(s);

		if (cr == -EAGAIN) {
			/* the stream moved under every read: A tries again later, if it can */
			pthread_mutex_unlock(&s->lock);
			san_sys_close(x);
			san_sys_close(y);
			return SAN_R_BUSY;
		}
		if (cr) {
			/* another process moved bytes on it */
			san_sock_drop(s, SAN_R_STATE);
			ok = false;
		}
	}
	if (ok && map_rings(s, rx->fd, prm.ring_size, prm.bulk_size, false, false) < 0) {
		san_up_unmap(s);
		ok = false;
	}
	if (!ok) {
		pthread_mutex_unlock(&s->lock);
		san_sys_close(x);
		san_sys_close(y);
		return s->map ? SAN_R_PROVIDER : SAN_R_STATE;
	}
	/*
	 * Pause the reader before ACCEPT exists (§9.2 rule 1): no receive runs past here. Or,
	 * without a pause (§16), it looks at A's switch-over word around each receive from here.
	 */
	s->attempted = true;
	s->prov = &san_prov_shm;
	san_stats_conn_set(s->proc->stc, SAN_CS_UPGRADING, SAN_CONN_KEEP, 0);
	if (p->caps & SAN_CAP_NOPAUSE)
		san_sock_prep_looking(s);
	else
		s->rx = SK_RX_PAUSED;
	s->xfd = x;
	s->ylocal = y;
	s->nonce_mine = san_up_nonce();
	s->nonce_peer = p->nonce;
	s->peer_pid = rx->cred.pid;
	cma_for_peer(s, rx->cred.uid);
	/* kept: a direct read is trusted only while the process it read from still lives */
	if (rx->pidfd >= 0 && s->peer_pidfd < 0)
		s->peer_pidfd = san_fd_dup_hidden(rx->pidfd);
	s->peer_caps = p->caps;
	s->txr.unhashed = (p->caps & SAN_CAP_UNHASHED) != 0; /* (as A's: the handshake's word) */
	pthread_mutex_unlock(&s->lock);

	mine.pid = (uint32_t)getpid();
	mine.fd_hint = s->fd;
	m.u.accept.caps = (prm.bulk_size ? SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE : 0) |
			  SAN_CAP_DIRECT_READ | SAN_CAP_UNHASHED | (p->caps & SAN_CAP_NOPAUSE);
	m.u.accept.nonce = s->nonce_mine;
	m.u.accept.params = &mine;
	m.u.accept.params_len = sizeof(mine);
	if (c->held_late == 2)
		accept_late_hold(c->w.fd, true); /* (its end, not its ABORT: the send must fail) */
	if (san_sidechan_send(c->w.fd, &m, y) < 0) {
		if (!((p->caps & SAN_CAP_RETRIES) && b_unprepare(s, "our ACCEPT did not go")))
			san_up_b_fallback(s, SAN_R_CHANNEL);
		c->stage = 2;
		return 0;
	}
	c->stage = 1;
	return 0;
}

/*
 * Without a pause (§16), A's SWITCH says A proved us and looks at our word: we may commit our
 * own direction at our next send (or as our reader crosses A's MARK), and ring A on its Y.
 */
static void b_prepared(struct side_conn *c, struct san_side_rx *rx)
{
	struct san_sock *s = c->s;

	san_sock_lock(s);
	if (rx->fd < 0 || s->prep != SK_PREP_LOOKING) {
		/* (A commits only after its SWITCH: a word it committed here is a lie) */
		if (s->prep)
			san_sock_prep_drop(s, SAN_R_PROTOCOL);
	} else {
		s->ypeer = san_fd_hide(rx->fd);
		rx->fd = -1;
		san_debug("fd %d: prepared (B, no pause)", s->fd);
		san_sock_prep_ready(s);
	}
	pthread_mutex_unlock(&s->lock);
	c->stage = 2;
}

/* A's SWITCH: B commits at once (hold, SWITCH, MARK, HELLO) and drains to X_A. */
static void b_switch(struct ev_loop *loop, struct side_conn *c, struct san_side_rx *rx)
{
	struct san_sock *s = c->s;
	struct san_msg m = { .type = SAN_T_SWITCH };
	int r;

	if (s->prep) {
		b_prepared(c, rx);
		return;
	}
	san_sock_lock(s);
	if (s->peer_caps & SAN_CAP_NOPAUSE) {
		/*
		 * Prepared without a pause, and let go since (a fork, a drop: our reader withdrew
		 * from A's word, and the connection is TCP's): A's SWITCH finds nothing to commit.
		 * A learns it from our word (its commit finds it WITHDRAWN: it stays TCP).
		 */
		pthread_mutex_unlock(&s->lock);
		san_side_rx_close_fds(rx);
		c->stage = 2;
		return;
	}
	if (s->proc->closing && !s->committed && rx->fd >= 0 && rx->msg.u.sw.offset >= s->tcp_rx) {
		/*
		 * Our application closed the connection while A decided (§9.2 rule 4): all we
		 * sent, and our FIN or RST, are on TCP already. Let go without a SWITCH: A,
		 * which commits only on ours, stays on TCP and reads them there.
		 */
		san_side_rx_close_fds(rx);
		san_up_fallback(s, SAN_R_STATE);
		pthread_mutex_unlock(&s->lock);
		c->stage = 2;
		return;
	}
	if (rx->fd < 0 || rx->msg.u.sw.offset < s->tcp_rx || s->proc->closing) {
		pthread_mutex_unlock(&s->lock);
		san_side_rx_close_fds(rx);
		san_sock_lock(s);
		san_sock_commit(s);
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_PROTOCOL);
		pthread_mutex_unlock(&s->lock);
		c->stage = 2;
		return;
	}
	s->ypeer = san_fd_hide(rx->fd);
	rx->fd = -1;
	san_sock_commit(s);
	s->tx = SK_TX_SAN;
	s->x_peer = rx->msg.u.sw.offset;
	s->rx = SK_RX_DRAIN;
	m.u.sw.offset = s->tcp_tx;
	s->mark_due = true; /* with our first stream bytes or our end: san_sock_mark_flush */
	r = san_sidechan_send(c->w.fd, &m, -1);
	if (r == 0)
		r = san_conn_send_hello(s) < 0 ? -EIO : 0;
	if (r < 0)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_CHANNEL);
	if (!s->proc->closing)
		san_sock_epoll_rearm_paused(s);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	san_debug("fd %d: committed (B), peer's X %llu", s->fd, (unsigned long long)s->x_peer);
	c->stage = 2;
}

#define SAN_B_ACCEPT_TRIES 100 /* x 5 ms: how long a PROPOSE may wait for accept() */
#define SAN_B_BUSY_TRIES 20    /* x 1 ms: how long it may wait for a receive in the kernel */

/*
 * A PROPOSE names a connection none of ours has. It is worth waiting for only while no
 * process holds it yet (it sits in the listener's accept queue), or while this process holds
 * it on a number our accept() wrapper has not recorded yet. Held by another process -- a
 * worker that accepted it on a listener it inherited from us, a child it was handed to -- or
 * by us on a number that stays TCP (its window closed), or gone, it never will be ours: A,
 * waiting in its data call, must hear so now, not after the retries (a connection's first
 * request took 0.5 s under nginx's workers).
 */
static bool b_owner_may_come(const struct san_propose *p)
{
	struct san_tuple t = { .local = p->dst, .peer = p->src };
	struct san_fd *f;
	uint64_t ino;
	int r = san_owner_find_inode(&t, &ino), fd;

	if (r != 0)
		return r != -ENOENT; /* in the accept queue, or the lookup could not say */
	fd = san_owner_pid_fd_of_inode(getpid(), ino);
	if (fd < 0)
		return false;
	/*
	 * A candidate recorded just now (after our lookup), or a number our accept() wrapper has
	 * not even tracked yet (the kernel's accept() has returned, the wrapper runs next): it
	 * may still come. One that stays TCP (SAN_FD_CONN) never will.
	 */
	f = san_fd_get(fd);
	if (f && (san_fd_flags(f) & SAN_FDF_FORKED) && !(san_fd_flags(f) & SAN_FDF_TOUCHED))
		return false; /* a fork copied it and we have not touched it since: the child's */
	return !f || san_fd_state(f) == SAN_FD_PASSIVE;
}

/*
 * BUSY: B's receive is in the kernel (sock_direct). With bytes waiting in the socket it returns
 * as soon as its thread runs, so the PROPOSE is worth holding a little: A proposes by bytes
 * (256 KiB sent), and on loopback its sends do not wait for ours, so a receiver whose thread has
 * been woken but not yet run (two CPUs, a busy peer) would otherwise see all of A's tries
 * refused within a millisecond (t_switch_policy's bulk case, 1 run in 5). With nothing waiting,
 * the receive waits for A, and A waits for our answer: refuse at once.
 */
static bool b_receive_returns_soon(struct san_sock *s, int lite)
{
	bool r;

	if (!s) {
		/*
		 * A lite candidate's gate, draining: calls that cannot sleep leave in a moment (a
		 * blocking send waits outside the gate); a blocking receive in the kernel only if
		 * bytes wait for it.
		 */
		struct san_lite *l = lite >= 0 ? san_lite_of(lite) : NULL;

		return l && (!__atomic_load_n(&l->sleepers, __ATOMIC_SEQ_CST) || san_sys_inq(lite) > 0);
	}
	san_sock_lock(s);
	r = !s->in_kernel || (s->tcp >= 0 && san_sys_inq(s->tcp) > 0); /* (returned already) */
	pthread_mutex_unlock(&s->lock);
	return r;
}

/*
 * A PROPOSE: answer it, or (no such connection yet: the application has not accepted it)
 * look again in a few milliseconds, within A's ACCEPT timeout.
 */
static void b_on_propose(struct ev_loop *loop, struct side_conn *c)
{
	uint16_t why;

	/*
	 * In turn: held before b_propose looks, held once it prepared, not held (A's engine
	 * ignores the ACCEPT of a try it repeats under this fault: its ABORT meets a prepared B)
	 */
	if (san_fault(SAN_FAULT_ACCEPT_LATE) && (c->prx.msg.u.propose.caps & SAN_CAP_RETRIES) &&
	    !c->held_late)
		c->held_late =
			(int)(__atomic_fetch_add(&accept_late_n, 1, __ATOMIC_RELAXED) % 3) + 1;
	if (c->held_late == 1)
		accept_late_hold(c->w.fd, false);
	why = b_propose(c, &c->prx);

	/* (a proposer that tries again later hears at once: no data call of its waits on us) */
	if (why == SAN_R_NOT_OWNER && !(c->prx.msg.u.propose.caps & SAN_CAP_RETRIES) &&
	    ++c->tries < SAN_B_ACCEPT_TRIES && b_owner_may_come(&c->prx.msg.u.propose)) {
		ev_timer_set(&c->retry, 0.005, 0.);
		san_ev.ev_timer_start(loop, &c->retry);
		return;
	}
	if (why == SAN_R_BUSY && c->busy_kernel && ++c->tries < SAN_B_BUSY_TRIES &&
	    b_receive_returns_soon(c->s, c->lite_busy)) {
		ev_timer_set(&c->retry, 0.001, 0.);
		san_ev.ev_timer_start(loop, &c->retry);
		return;
	}
	if (!c->s && c->lite_busy >= 0) {
		san_lite_refused_busy(c->lite_busy);
		san_lite_undrain(c->lite_busy); /* refused BUSY: its calls go on, on TCP */
		c->lite_busy = -1;
	}
	san_side_rx_close_fds(&c->prx);
	if (why) {
		/* The connection itself is untouched: its window closes by itself. */
		san_debug("side channel: PROPOSE refused (%s)", san_reason_str(why));
		side_reject(c->w.fd, why);
		side_close(loop, c);
	} else if (c->stage == 2) {
		side_close(loop, c);
	} else {
		san_ev.ev_io_start(loop, &c->w);
	}
	if (!why)
		b_pair_ahead(); /* (the answer has gone: A proves us meanwhile) */
}

static void b_propose_retry(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct side_conn *c = (struct side_conn *)((char *)t - offsetof(struct side_conn, retry));

	b_on_propose(loop, c);
}

static void b_side_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct side_conn *c = (struct side_conn *)w;
	struct san_side_rx rx;
	int r;

	if (c->stage == 0) {
		r = san_sidechan_recv(w->fd, &c->prx, true);
		if (r == -EAGAIN)
			return;
		if (r < 0 || c->prx.msg.type != SAN_T_PROPOSE) {
			side_close(loop, c);
			return;
		}
		/* Nothing more may come before our answer: stop reading meanwhile. */
		san_ev.ev_io_stop(loop, w);
		b_on_propose(loop, c);
		return;
	}
	r = san_sidechan_recv(w->fd, &rx, c->stage < 2);
	if (r == -EAGAIN)
		return;
	if (r == -ECONNRESET && c->stage == 1) {
		/*
		 * (the channel's error comes before the messages queued behind it, and is told
		 * once: A's SWITCH or ABORT, if it sent one, is the next read; else its end)
		 */
		r = san_sidechan_recv(w->fd, &rx, true);
		if (r == -EAGAIN)
			r = -EPIPE;
	}
	if (c->stage == 1) {
		if (r == 0 && rx.msg.type == SAN_T_SWITCH) {
			b_switch(loop, c, &rx);
			san_side_rx_close_fds(&rx);
			if (c->stage == 2)
				side_close(loop, c);
			return;
		}
		if (!r)
			san_side_rx_close_fds(&rx);
		/*
		 * ABORT, EOF, or garbage before A committed: resume, stay TCP; a candidate still
		 * when A gave up waiting for our answer and tries again later (its timer fired with
		 * our ACCEPT on its way).
		 */
		if (!((c->prx.msg.u.propose.caps & SAN_CAP_RETRIES) &&
		      (r == -EPIPE || (r == 0 && rx.msg.type == SAN_T_ABORT &&
				       a_tries_again(rx.msg.u.abort.reason))) &&
		      b_unprepare(c->s, "its ABORT came first")))
			san_up_b_fallback(c->s, r == 0 && rx.msg.type == SAN_T_ABORT
							? rx.msg.u.abort.reason
							: SAN_R_CHANNEL);
		side_close(loop, c);
		return;
	}
	if (!r)
		san_side_rx_close_fds(&rx);
	side_close(loop, c);
}

static void b_listener_read(struct ev_loop *loop, ev_io *w, int revents)
{
	for (;;) {
		int fd = san_sidechan_accept(w->fd);
		struct side_conn *c;

		if (fd < 0)
			return;
		fd = san_fd_hide(fd);
		c = calloc(1, sizeof(*c));
		if (!c) {
			san_sys_close(fd);
			continue;
		}
		(void)san_sidechan_pass_pidfd(fd);
		c->prx.fd = c->prx.pidfd = -1;
		c->lite_busy = -1;
		ev_io_init(&c->w, b_side_read, fd, EV_READ);
		ev_init(&c->retry, b_propose_retry);
		san_ev.ev_io_start(loop, &c->w);
		/* A sends its PROPOSE right after connecting: usually here already (a loop saved) */
		b_side_read(loop, &c->w, EV_READ);
	}
}

/* The side channels of this process's listeners: closed with their TCP listener. */
struct side_listener {
	ev_io w;
	ev_timer linger; /* after the TCP listener closed: PROPOSEs of accepted connections */
	int lfd;
	struct side_listener *next;
};

static pthread_mutex_t listeners_lock = PTHREAD_MUTEX_INITIALIZER;
static struct side_listener *listeners;

static void listen_on_engine(void *arg)
{
	struct side_listener *l = arg;

	san_ev.ev_io_start(san_engine_loop(), &l->w);
}

#define SAN_SIDE_LINGER 2.0 /* seconds a side channel outlives its TCP listener */

static void side_linger_end(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct side_listener *l = (struct side_listener *)((char *)t -
							   offsetof(struct side_listener, linger));

	san_ev.ev_io_stop(loop, &l->w);
	san_sys_close(l->w.fd);
	free(l);
}

/*
 * The TCP listener is closed, but connections it accepted just before (a one-shot server
 * closes its listener right after accept()) may still be proposed: the side channel stays a
 * little longer. Its name stays taken meanwhile (a new listener on the same address and port
 * within that time gets no side channel: its connections stay TCP).
 */
static void unlisten_on_engine(void *arg)
{
	struct side_listener *l = arg;

	ev_timer_init(&l->linger, side_linger_end, SAN_SIDE_LINGER, 0.);
	san_ev.ev_timer_start(san_engine_loop(), &l->linger);
}

/*
 * A tracked TCP listener gets its side channel, named after its address and served by the
 * engine until the listener is closed (san_up_unlisten).
 */
int san_up_listen(int lfd)
{
	struct san_sidechan_name n;
	struct side_listener *l;
	uint64_t netns;
	int sfd, r;

	r = san_sidechan_netns_fd(lfd, &netns);
	if (r == 0)
		r = san_sidechan_listener_name(lfd, netns, &n);
	if (r < 0)
		return r;
	sfd = san_fd_hide(san_sidechan_listen(&n));
	if (sfd < 0) {
		san_info("side channel %s: %s: connections to this listener stay on TCP",
			 n.path + 1, strerror(-sfd));
		return sfd;
	}
	(void)san_sidechan_pass_pidfd(sfd);
	l = calloc(1, sizeof(*l));
	if (!l) {
		san_sys_close(sfd);
		return -ENOMEM;
	}
	l->lfd = lfd;
	ev_io_init(&l->w, b_listener_read, sfd, EV_READ);
	pthread_mutex_lock(&listeners_lock);
	l->next = listeners;
	listeners = l;
	pthread_mutex_unlock(&listeners_lock);
	r = san_engine_call(listen_on_engine, l);
	if (r < 0) {
		san_up_unlisten(lfd);
		return r;
	}
	san_debug("fd %d: side channel listening as %s", lfd, n.path + 1);
	return 0;
}

void san_up_unlisten(int lfd)
{
	struct side_listener **pp, *l = NULL;

	pthread_mutex_lock(&listeners_lock);
	for (pp = &listeners; *pp; pp = &(*pp)->next)
		if ((*pp)->lfd == lfd) {
			l = *pp;
			*pp = l->next;
			break;
		}
	pthread_mutex_unlock(&listeners_lock);
	if (l && san_engine_call(unlisten_on_engine, l) < 0) {
		san_sys_close(l->w.fd);
		free(l);
	}
}

/*
 * A connection's name found in use is tried again at the data calls of the next this many ns,
 * at most once per SAN_NAME_RETRY_NS (a try costs a call a few system calls: a program that
 * reads a byte per call, as bash's read does, must not pay them at each).
 */
#define SAN_NAME_RETRY_FOR_NS (200u * 1000u * 1000u)
#define SAN_NAME_RETRY_NS (1000u * 1000u)

/*
 * ---- A connection's own name ----------------------------------------------------------------
 * A process that holds an accepted connection but does not serve its listener's name (a worker
 * that accepts on a listener its parent made, a SO_REUSEPORT listener whose name another
 * process has) binds a name for that connection alone, in its first data call on it, so that
 * the connector's PROPOSE reaches the process that owns the connection (docs/protocol.md,
 * "Names"). It lives until B's window closes or the connection is freed.
 */
struct conn_name {
	ev_io w;
	ev_timer t;
	bool closed;
};

static void conn_name_close(struct ev_loop *loop, struct conn_name *cn)
{
	if (cn->closed)
		return;
	cn->closed = true;
	san_ev.ev_io_stop(loop, &cn->w);
	san_ev.ev_timer_stop(loop, &cn->t);
	san_sys_close(cn->w.fd);
}

static void conn_name_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	conn_name_close(loop, (struct conn_name *)((char *)t - offsetof(struct conn_name, t)));
}

static void conn_name_start(void *arg)
{
	struct conn_name *cn = arg;

	san_ev.ev_io_start(san_engine_loop(), &cn->w);
	san_ev.ev_timer_start(san_engine_loop(), &cn->t);
}

static void conn_name_free(void *arg)
{
	conn_name_close(san_engine_loop(), arg);
	free(arg);
}

bool san_up_serves(int lfd)
{
	struct side_listener *l;
	bool r = false;

	pthread_mutex_lock(&listeners_lock);
	for (l = listeners; l && !r; l = l->next)
		r = l->lfd == lfd;
	pthread_mutex_unlock(&listeners_lock);
	return r;
}

void san_up_name_conn(struct san_sock *s)
{
	struct san_sidechan_name n;
	struct conn_name *cn;
	uint64_t netns, now = san_sock_now_ns();
	int fd, r;

	if (s->proc->name_retry_ns && now < s->proc->name_retry_ns)
		return; /* (in use a moment ago: a later call tries) */
	s->proc->name_decided = true;
	r = san_sock_tuple(s) ? san_sidechan_netns_fd(s->fd, &netns) : -ENOTCONN;
	if (!r)
		r = san_sidechan_name_conn(&n, netns, &s->tuple.local, &s->tuple.peer);
	fd = r ? r : san_fd_hide(san_sidechan_listen(&n));
	if (fd == -EADDRINUSE && !s->proc->name_give_up_ns)
		s->proc->name_give_up_ns = now + SAN_NAME_RETRY_FOR_NS;
	if (fd == -EADDRINUSE && now < s->proc->name_give_up_ns) {
		/*
		 * The process that handed it to us at exec still has the name (git daemon --serve
		 * closes its copies once upload-pack runs, and its engine frees the name a moment
		 * later): the next data calls try again, while A's proposals are retried.
		 */
		s->proc->name_decided = false;
		s->proc->name_retry_ns = now + SAN_NAME_RETRY_NS;
		san_debug("fd %d: its name is still in use: trying again at a later call", s->fd);
		return;
	}
	if (fd < 0) {
		san_debug("fd %d: no name of its own (%s): it stays on TCP", s->fd, strerror(-fd));
		return;
	}
	(void)san_sidechan_pass_pidfd(fd);
	cn = calloc(1, sizeof(*cn));
	if (!cn) {
		san_sys_close(fd);
		return;
	}
	ev_io_init(&cn->w, b_listener_read, fd, EV_READ);
	ev_timer_init(&cn->t, conn_name_timeout,
		      s->deadline_ns > now ? (double)(s->deadline_ns - now) / 1e9 : 0.001, 0.);
	if (san_engine_call(conn_name_start, cn) < 0) {
		san_sys_close(fd);
		free(cn);
		return;
	}
	s->proc->named = cn;
	san_debug("fd %d: named %s", s->fd, n.path + 1);
}

void san_up_unname(struct san_sock *s)
{
	/*
	 * Freed on the engine, which may be watching it. If the engine cannot take the work
	 * (out of memory, or stopping at exit), the name stays as it is until its window's end
	 * or the process's: never freed under a running watcher.
	 */
	if (s->proc->named)
		(void)san_engine_call(conn_name_free, s->proc->named);
	s->proc->named = NULL;
}

/* fork(): the child's copy of a name is the parent's socket; the child drops it. */
void san_up_unname_child(struct san_sock *s)
{
	struct conn_name *cn = s->proc->named;

	if (!cn)
		return;
	if (!cn->closed)
		san_sys_close(cn->w.fd);
	free(cn);
	s->proc->named = NULL;
}

/* fork(): the child serves no side channel (it has no engine yet); its copies are closed. */
void san_up_atfork_child(void)
{
	struct side_listener *l, *next;

	if (spare_x >= 0 && fd_ino(spare_x) == spare_ino[0])
		san_sys_close(spare_x);
	if (spare_y >= 0 && fd_ino(spare_y) == spare_ino[1])
		san_sys_close(spare_y);
	spare_x = spare_y = -1;
	b_diag_drop();

	pthread_mutex_init(&listeners_lock, NULL);
	for (l = listeners; l; l = next) {
		next = l->next;
		san_sys_close(l->w.fd);
		free(l);
	}
	listeners = NULL;
}

/* ---- the anchor: EOF or an error there means the peer process is gone -------------------- */

struct anchor_watch {
	ev_io w;
	struct san_sock *s;
};

static void anchor_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct anchor_watch *a = (struct anchor_watch *)w;
	struct san_sock *s = a->s;

	san_sock_lock(s);
	san_sock_check_anchor(s);
	if (s->anchor_dead)
		san_ev.ev_io_stop(loop, w);
	pthread_mutex_unlock(&s->lock);
}

static void watch_on_engine(void *arg)
{
	struct anchor_watch *a = arg;

	ev_io_init(&a->w, anchor_read, a->s->tcp, EV_READ);
	san_ev.ev_io_start(san_engine_loop(), &a->w);
}

static void unwatch_on_engine(void *arg)
{
	struct anchor_watch *a = arg;

	san_ev.ev_io_stop(san_engine_loop(), &a->w);
	san_sock_put(a->s);
	free(a);
}

void san_up_watch_anchor(struct san_sock *s)
{
	struct anchor_watch *a = calloc(1, sizeof(*a));
	struct san_sock *ref;

	if (!a)
		return;
	ref = san_sock_get(s->fd);
	if (ref != s) {
		san_sock_put(ref);
		free(a);
		return;
	}
	a->s = s;
	s->proc->ew = a;
	if (san_engine_call(watch_on_engine, a) < 0) {
		s->proc->ew = NULL;
		san_sock_put(s);
		free(a);
	}
}

static void unwatch_fin_on_engine(void *arg);

void san_up_unwatch(struct san_sock *s)
{
	void *a = s->proc->ew, *f;

	s->proc->ew = NULL;
	if (a && san_engine_call(unwatch_on_engine, a) < 0)
		san_warn("fd %d: anchor watch not stopped", s->fd);
	san_sock_lock(s);
	f = s->proc->fw;
	s->proc->fw = NULL;
	san_up_unwatch_rx_edges(s);
	pthread_mutex_unlock(&s->lock);
	if (f && san_engine_call(unwatch_fin_on_engine, f) < 0)
		san_warn("fd %d: DISCONNECT watch not stopped", s->fd);
}

/* ---- an engine watcher on a connection: its own dup of an fd, a reference to the sock ---- */

struct sock_watch {
	ev_io w;
	struct san_sock *s;
};

static void sock_watch_start_on_engine(void *arg)
{
	struct sock_watch *sw = arg;

	san_ev.ev_io_start(san_engine_loop(), &sw->w);
}

/* Stop (on the engine thread), close its dup, drop its reference. */
static void sock_watch_free(struct ev_loop *loop, struct sock_watch *sw)
{
	san_ev.ev_io_stop(loop, &sw->w);
	san_sys_close(sw->w.fd);
	san_sock_put(sw->s);
	free(sw);
}

/*
 * A watcher's callback begins here: the sock's lock, taken, while the watcher is still the one
 * in *slot; else (san_up_unwatch took it: its queued call frees it) it is stopped, the lock
 * left, and false.
 */
static bool sock_watch_lock(struct ev_loop *loop, struct sock_watch *sw, void *const *slot)
{
	san_sock_lock(sw->s);
	if (*slot == sw)
		return true;
	pthread_mutex_unlock(&sw->s->lock);
	san_ev.ev_io_stop(loop, &sw->w);
	return false;
}

/*
 * Watch a dup of fd for events on the engine thread, the caller's reference to s going with
 * the watcher (dropped here on failure). The watcher, or NULL. Lock held.
 */
static struct sock_watch *sock_watch(struct san_sock *s, int fd, int events,
				     void (*cb)(struct ev_loop *, ev_io *, int))
{
	struct sock_watch *sw = calloc(1, sizeof(*sw));
	int d = san_fd_dup_hidden(fd);

	if (!sw || d < 0) {
		if (d >= 0)
			san_sys_close(d);
		free(sw);
		san_sock_put(s);
		return NULL;
	}
	sw->s = s;
	ev_io_init(&sw->w, cb, d, events);
	if (san_engine_call(sock_watch_start_on_engine, sw) < 0) {
		san_sys_close(d);
		san_sock_put(s);
		free(sw);
		return NULL;
	}
	return sw;
}

/*
 * fork(), in the child: the engine watchers of a connection are the parent engine's, which did
 * not come along; the child's copies of them are dropped (with their own dups of X or the TCP
 * socket, which would keep those open for the child's whole life), and so are the references
 * they held, or the child's sock would never be freed: its fds would stay open, and a slot a
 * fork shared never let go. Single-threaded.
 */
void san_up_unwatch_child(struct san_sock *s)
{
	struct sock_watch *f = s->proc->fw, *m = s->proc->mw, *e = s->proc->rw;

	s->proc->refs -= !!s->proc->ew + !!f + !!m + !!e;
	free(s->proc->ew);
	if (f)
		san_sys_close(f->w.fd);
	if (m)
		san_sys_close(m->w.fd);
	if (e)
		san_sys_close(e->w.fd);
	free(f);
	free(m);
	free(e);
	s->proc->ew = s->proc->fw = s->proc->mw = s->proc->rw = NULL;
}

/* ---- the rest of a MARK the TCP send buffer had no room for ------------------------------ */

/*
 * B's application sent on TCP before the switch-over and A has not read it all: our MARK
 * waits for room behind those bytes. The watcher writes it through its own dup of the TCP
 * socket (the application may close its number meanwhile: the MARK must still go, the ring's
 * bytes behind it are the peer's).
 */
static void mark_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sock_watch *mw = (struct sock_watch *)w;
	struct san_sock *s = mw->s;
	int r = 0;

	san_sock_lock(s);
	if (!s->err)
		r = san_up_write_mark(s, w->fd);
	if (r == -EAGAIN) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	if (r < 0)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
	s->mark_due = false;
	s->proc->mw = NULL;
	pthread_mutex_unlock(&s->lock);
	sock_watch_free(loop, mw);
}

/* Lock held. The sock may be closing already: the watcher holds its own reference. */
void san_up_watch_mark(struct san_sock *s)
{
	if (s->proc->mw)
		return;
	san_sock_hold(s);
	s->proc->mw = sock_watch(s, s->tcp, EV_WRITE, mark_writable);
	if (!s->proc->mw)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_RESOURCES);
}

/* ---- waiting for ring space: a pending DISCONNECT, an application's EPOLLOUT -------------- */

/*
 * X became writable: the peer freed room (and took our plugs). Post a pending DISCONNECT; an
 * application still on the TCP fd number gets its epoll registrations looked at again.
 */
static void fin_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sock_watch *f = (struct sock_watch *)w;
	struct san_sock *s = f->s;
	bool done;

	if (!sock_watch_lock(loop, f, &s->proc->fw))
		return;
	san_sock_flush_fin(s);
	if (s->fin_pending && !s->err && san_conn_tx_arm(s, SAN_HDR_LEN) == 1)
		san_sock_flush_fin(s);
	if (!s->swapped && !s->proc->closing) {
		/* the re-arm gives every muted registration its EPOLLOUT back, and EPOLLET an edge */
		san_sock_tx_unmute(s, false);
		san_sock_epoll_rearm(s);
	}
	done = !s->fin_pending || s->err;
	if (done)
		s->proc->fw = NULL;
	pthread_mutex_unlock(&s->lock);
	if (done)
		sock_watch_free(loop, f);
}

static void unwatch_fin_on_engine(void *arg)
{
	sock_watch_free(san_engine_loop(), arg);
}

/*
 * A watcher of X for a sock the registry still names by its number (a reference of the
 * registry's taken for the watcher), or NULL. Lock held.
 */
static struct sock_watch *sock_watch_named(struct san_sock *s, int events,
					   void (*cb)(struct ev_loop *, ev_io *, int))
{
	struct san_sock *ref = san_sock_get(s->fd);

	if (ref != s) {
		san_sock_put(ref);
		return NULL;
	}
	return sock_watch(s, s->xfd, events, cb);
}

/* ---- edges for an EPOLLET registration on a number still TCP's ------------------------- */

/*
 * Once the peer's way committed, its bytes come into our ring, but the application's number
 * stays the TCP socket until our reader crosses the peer's MARK (the swap). An edge-triggered
 * registration on it hears of the MARK's arrival, once; the ring's later arrivals ring X,
 * which none of the application's sets holds, and a reader that waits for the next edge
 * before it reads again (nginx, any EPOLLET loop that stops short of EAGAIN) waits for ever
 * (the no-pause switch-over, whose X is wherever the handshake ended: switch_sockapi.py's
 * epoll_et.again_more_data, 100 connections of 100). So the engine watches its own dup of X
 * until the swap: at each doorbell, the registrations are looked at again (EPOLL_CTL_MOD: the
 * TCP socket, the MARK still unread in it, is readable, and epoll reports it once more).
 */
static void rx_edge(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sock_watch *rw = (struct sock_watch *)w;
	struct san_sock *s = rw->s;
	bool done;

	if (!sock_watch_lock(loop, rw, &s->proc->rw))
		return;
	/* (swapped: X is the application's now, its doorbells its own: never drained here) */
	done = s->swapped || s->dropped || s->err || s->proc->closing;
	if (!done) {
		int due;

		done = san_conn_rx_drain_bells(s) < 0; /* (X shut: the peer's end is in the ring) */
		due = san_sock_rx_edge_due(s);
		if (due > 0) {
			san_sock_epoll_rearm_edges(s);
			san_debug("fd %d: an edge for the ring's frames past the peer's MARK", s->fd);
		}
		done |= due < 0;
	}
	if (done)
		s->proc->rw = NULL;
	pthread_mutex_unlock(&s->lock);
	if (done)
		sock_watch_free(loop, rw);
}

void san_up_unwatch_rx_edges(struct san_sock *s)
{
	void *e = s->proc->rw;

	s->proc->rw = NULL;
	if (e && san_engine_call(unwatch_fin_on_engine, e) < 0)
		san_warn("fd %d: doorbell watch not stopped", s->fd);
}

void san_up_watch_rx_edges(struct san_sock *s)
{
	bool et = false;

	if (s->proc->rw || !s->want_edges || s->swapped || s->err || s->proc->closing ||
	    !s->rxr.sh || s->xfd < 0 || s->prov != &san_prov_shm)
		return;
	for (int i = 0; i < s->proc->nep; i++)
		et |= (s->proc->ep[i].ev.events & EPOLLET) != 0;
	if (et)
		s->proc->rw = sock_watch_named(s, EV_READ, rx_edge);
}

/* Lock held. The watcher waits on its own dup of X: the application may close its number. */
void san_up_watch_tx(struct san_sock *s)
{
	if (!s->proc->fw)
		s->proc->fw = sock_watch_named(s, EV_WRITE, fin_writable);
}
