/* core — one TCP connection the engine manages: candidate I/O, the switch-over, the SAN path. */
#ifndef SAN_SOCK_H
#define SAN_SOCK_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "core/san_owner.h"
#include "core/san_prov.h"
#include "core/san_shm_ring.h"
#include "core/san_stage.h"

/*
 * Life of a connection (docs/engine.md):
 *
 *   A (connect): NEW --due data call--> the handshake on the engine (no pause, shm, the
 *                default: san_up.c a_prepare; the call goes on on TCP), or in that call
 *                (the paused switch-over: verbs, SANSWITCH_NOPAUSE=0; san_up_a_run)
 *   B (accept):  CAND (window open) --PROPOSE--> LOOKING --SWITCH--> READY (no pause), or
 *                --PROPOSE--> PAUSED --SWITCH--> ... (paused)
 *   both:        tx TCP -> SAN at commit; rx TCP -> DRAIN (to the peer's X, then its
 *                MARK) -> SAN; at the MARK the fd number is swapped for the notification
 *                socket and the fd becomes SAN_FD_SWITCHED. Any failure before commit:
 *                the fd goes back to plain SAN_FD_TCP and the sock is dropped.
 *
 * Every field below the lock is protected by it. Blocking never happens with the lock held. The
 * lock and cond are process-shared and the lock robust (san_sock_lock): a fork may share them.
 */
enum san_sock_rx { SK_RX_TCP, SK_RX_PAUSED, SK_RX_DRAIN, SK_RX_SAN };
enum san_sock_tx { SK_TX_TCP, SK_TX_SAN };
/*
 * The no-pause switch-over (SAN_CAP_NOPAUSE, docs/protocol.md §16), shm only. LOOKING: the
 * rings are mapped and our reader holds the peer's switch-over word around each TCP receive
 * (rxr); READY: the peer's reader does the same, so we may commit our own direction (txr).
 */
enum san_sock_prep { SK_PREP_NONE, SK_PREP_LOOKING, SK_PREP_READY };
/*
 * The peer's process has closed its last copy of the connection (the anchor ended) without a
 * DISCONNECT or ABORT for us to read: exited, killed, crashed, or closed it behind our wrappers.
 * The kernel would have ended its TCP socket with a FIN, or an RST if bytes we sent were left
 * unread there; on shm the rings tell which (docs/protocol.md §13, "The peer's process ends").
 */
enum san_peer_end {
	SK_PEER_HERE,	 /* the anchor is alive */
	SK_PEER_FIN,	 /* gone, our bytes all read: EOF after the ring's data, one send taken */
	SK_PEER_RST,	 /* gone with our bytes unread: ECONNRESET after the ring's data */
	SK_PEER_UNKNOWN, /* gone, and its reads are not seen (verbs): a reset */
};

#define SAN_SOCK_EPOLL_MAX 8

struct san_sock_epreg {
	int epfd;
	int fd; /* the number registered (a connection may have several: san_sock_adopt) */
	struct epoll_event ev; /* as the application asked (a mute takes EPOLLOUT from the kernel's) */
};

struct conn_name;
struct san_stats_conn;

/*
 * What one process alone holds of a connection (docs/engine.md §7.1). The sock itself lives in
 * a shared slot (core/san_slab.h): after a fork() a switched shm connection is one state in both
 * processes, its ring cursors, credits and flags under one process-shared lock. What is each
 * process's own sits here, in its heap, reached through s->proc: malloc'ed memory has the same
 * address in parent and child after a fork, each seeing its own copy.
 */
#define SAN_RX_ARMER_SLEEPER ((uintptr_t)1) /* (san_sock_proc.rx_armer; no thread's address) */

struct san_sock_proc {
	struct san_sock *next; /* registry list (for B's lookup by 4-tuple) */
	int refs;	       /* registry + callers in flight + engine */
	int fdrefs;	       /* fd numbers naming it (a dup of a switched fd; the numbers an
				* inherited connection came with: san_sock_adopt) */
	bool orphan;	       /* a fork child's copy: every call fails ECONNRESET */
	bool closing;	       /* the application closed it (in this process) */
	bool let_go;	       /* this process no longer counts among its users (close, exit) */
	bool unheld;	       /* ... nor among its holders (the sock freed, the exit) */
	bool watch_due;	       /* a fork shared it: this child's engine does not watch it yet */
	bool from_fork;	       /* a fork shared it with this process, its child: offers out
				* (direct grant, direct read) are the parent's threads' */
	struct conn_name *named; /* B: the connection's own side-channel name (san_up_name_conn) */
	/*
	 * Who stands behind the receive flag's last arm (san_rxwatch_defer): the thread whose own
	 * wait, one that watches the ring (a blocking receive after its spin, an epoll_wait's
	 * watch), put it up, and whose read may take it down again; SAN_RX_ARMER_SLEEPER, a wait
	 * about to sleep in the kernel without watching the ring (poll's, select's, any wait's
	 * arm of the quiet connections: san_rxwatch_announce), for which a read leaves it up;
	 * 0, no wait known (the switch's first arm, a read's, the tick's), taken down by a read.
	 * Lock held.
	 */
	uintptr_t rx_armer;
	/*
	 * A wait through the preload (an epoll_wait's watch) watched its ring since its last
	 * epoll_ctl: the application's waits for it are ours, and a nonblocking receive that finds
	 * the ring empty may leave it quiet (san_rxwatch_defer_empty). Lock held.
	 */
	bool wait_watched;
	bool name_decided;	 /* B: named, or not to be named, in this process */
	uint64_t name_retry_ns;	 /* B: that name was in use: the next try not before (0: none yet) */
	uint64_t name_give_up_ns; /* B: ... and none after this (san_up_name_conn) */
	bool vnamed;		 /* B: in the family's verbs table (san_vredir.h) for this process */
	void *mw;		 /* engine watcher writing the MARK's rest (san_up_watch_mark) */
	void *fw;		 /* engine watcher for ring space (pending DISCONNECT, EPOLLOUT) */
	void *rw;		 /* engine watcher of X's doorbells before the swap (san_up_watch_rx_edges) */
	void *ew;		 /* engine watcher of the anchor (engine thread only) */
	bool tx_mute;		 /* not swapped, the ring full after a nonblocking send: the fd's
				  * POLLOUT comes from X until room comes (san_sock_tx_mute) */
	struct san_sock_epreg ep[SAN_SOCK_EPOLL_MAX]; /* this process's epoll sets (the
						       * early ones too: san_epoll_early) */
	int nep;
	/*
	 * Its slot in this process's stats file (san_stats_conn.h), or NULL: set at its start,
	 * NULL from its close and in a fork child, whose file is its own (a child writing through
	 * the parent's pointer would count into the parent's slot).
	 */
	struct san_stats_conn *stc;
	bool stc_child; /* a fork child's candidate or shared connection: its slot is claimed at
			 * its first data call here (atomic; the claim under the lock) */
};

struct san_sock {
	struct san_sock_proc *proc; /* this process's own part (see above) */
	/*
	 * Processes that share the connection (atomics; 1, more once a fork shared it: switched
	 * shm connections only). users: those whose application has not closed it (a close, an
	 * exit); the last says DISCONNECT or ABORT. holders: those whose memory still refers to
	 * the slot (their last reference let go); the last frees it.
	 */
	int users;
	int holders;
	uint32_t lock_gen; /* odd while one process builds the lock again (san_sock_lock_rebuild) */
	int fd;	  /* the application's fd number */
	int role; /* SAN_UP_ROLE_A / SAN_UP_ROLE_B */
	struct san_tuple tuple; /* as this side sees the TCP connection */

	pthread_mutex_t lock;
	pthread_cond_t cond; /* rx leaves PAUSED */

	bool attempted;	 /* A: the upgrade ran (whatever its outcome) */
	bool committed;	 /* past the point of no return: failures reset */
	bool swapped;	 /* fd is the notification socket now */
	bool dropped;	 /* stays TCP: the fd passes through from now on */
	bool rd_shut;	 /* shutdown(SHUT_RD) on a switched fd: reads return 0 */
	uint64_t deadline_ns; /* the window closes (CLOCK_MONOTONIC): A proposes, B takes one */
	bool tuple_known;     /* B: tuple is filled in (san_sock_tuple); A fills it when it proposes */
	bool tuple_failed;    /* B: the kernel could not say (not asked again) */
	bool late;	      /* A: the peer is on this host: propose once due (a_due) */
	bool bytes_due_tx;    /* A: due by bytes in a send: propose when a send would wait */
	bool policy_set;      /* A: late is decided */
	bool to_known;	      /* A: tuple.peer is connect()'s address */
	bool ex_sent;	      /* we sent in the current exchange (A, B: san_sock.c, a_due) */
	uint32_t ex_done;     /* exchanges completed: sent, then received */
	uint64_t b_late_ns;   /* B, no pause: when its window's last exchange passed (0: not yet) */
	uint64_t ex_rx0;      /* tcp_rx when the current exchange's first send went */
	uint64_t ex_rx_pre;   /* A: tcp_rx before the send that may begin an exchange (a_due) */
	bool due_waits;	      /* A: due, but another thread's call was in the kernel */
	bool ex_quiet;	      /* B: nothing of A's waited as this send began (b_send_begins) */
	bool last_try;	      /* A: the proposal at its shutdown, its last (a_due_at_shutdown) */
	uint32_t up_tries;    /* A: proposals that found another process than the owner */
	uint32_t in_kernel;   /* calls in the kernel on the TCP socket (sock_direct), A or B */
	uint32_t ex_retry;    /* A: ... the next one not before this exchange */
	uint64_t retry_bytes; /* A: ... or these bytes over TCP */
	bool proposed_in_send; /* A: due by bytes in a send (a_due, sock_send_would_wait) */
	bool retry_rx;	      /* A: refused in a send: due again at its next receive */
	bool touched;	      /* B: this process made a data call or a wait on it (san_sock_touch) */
	bool forked;	      /* a fork() copied it: another process may hold it too */
	bool fork_base_ok;    /* the kernel's counts were taken at the fork, as below */
	int64_t fork_dtx, fork_drx; /* the kernel's count minus ours, each way, at the fork */
	enum san_sock_rx rx;
	enum san_sock_tx tx;
	enum san_sock_prep prep;
	bool prep_gone;	 /* a fork ended the preparation: the next data call drops it */
	unsigned int prep_fork_gen; /* A: san_sock_fork_gen() when its handshake began */
	uint64_t tcp_tx, tcp_rx; /* application bytes moved over TCP */
	uint64_t x_peer;	 /* the peer's switch-over offset */
	uint64_t edge_prod;	 /* the inbound ring's prod at the engine's last edge (san_up_watch_rx_edges) */
	uint64_t nonce_mine;	 /* what the peer writes in its MARK */
	uint64_t nonce_peer;	 /* what we write in ours */
	uint8_t mark[16];
	unsigned int mark_have;	  /* MARK bytes read so far */
	unsigned int mark_out;	  /* our MARK bytes written so far (B may finish late) */
	bool mark_due;		  /* our MARK waits for our first stream bytes or our end in
				   * the ring (san_sock_mark_flush; verbs: their delivery) */

	int tcp;   /* the TCP socket: == fd until the swap, then the anchor (our dup) */
	int side;  /* side-channel socket, -1 once closed */
	int xfd;   /* our notification socket X (becomes fd at the swap) */
	int xold;  /* X's number before the swap, kept open (see san_sock_swap) */
	int ylocal;/* our copy of X's peer Y: lets us ring X ourselves */
	int ypeer; /* the peer's Y: ring the peer, or drain its plugs */
	pid_t peer_pid;
	const struct san_prov_ops *prov; /* the provider carrying it, once an upgrade began */
	void *pv;			 /* that provider's own state of the connection, or NULL */

	void *map; /* the memfd mapping: two rings, two bulk areas */
	size_t map_len;
	uint8_t *bulk_tx; /* our bulk area (READ regions we offer), NULL if none */
	uint8_t *bulk_rx; /* the peer's bulk area (verbs: our mirror of it), NULL if none */
	uint64_t bulk_size;
	uint64_t region_max; /* a transfer's region at most (0: bulk_size / 4) */
	uint64_t bulk_addr, peer_bulk_addr; /* verbs: the areas' registered address and key, */
	uint32_t bulk_key, peer_bulk_key;   /* ours and the peer's (its standing WRITE_GRANT) */
	struct san_stage stage; /* which bytes of bulk_tx the peer still has to read */
	bool bulk_ready;	/* bulk_tx's pages are committed (san_conn "registration") */
	bool bulk_broken;	/* ... and that failed: no READ on this connection */
	bool tx_wait_area;	/* the last send waits for bulk_tx space, not ring space */
	bool tx_area_armed;	/* verbs: ... and X is plugged until a READ_DONE (area_arm) */
	uint32_t peer_caps;	/* SAN_CAP_* of the peer's HELLO */
	bool grant_sent;	/* our standing WRITE_GRANT of bulk_rx is out */
	bool peer_grant;	/* the peer's standing WRITE_GRANT of bulk_tx came */
	uint32_t xfer_tx_id;	/* the id of our last READ transfer */
	bool xfer_rx_open;	/* the peer's FIRST DATA came; its SRC_AVAIL / WRITE_DONE is next */
	uint8_t xfer_rx_mode;	/* SAN_XMODE_READ or SAN_XMODE_GRANT */
	uint32_t xfer_rx_id;
	uint64_t xfer_rx_rest;	/* bytes of that transfer after the FIRST payload */
	uint64_t xfer_rx_off;	/* of which delivered */
	struct san_shm_prod txr;
	struct san_shm_cons rxr;
	uint32_t rx_off;   /* bytes of the current DATA frame already delivered */
	bool hello_rx;
	bool peer_fin;	   /* DISCONNECT received: EOF after the ring's data */
	bool fin_sent;	   /* shutdown SHUT_WR or close: no more sends */
	bool fin_pending;  /* ... but the DISCONNECT waits for ring space */
	int err;	   /* sticky: -ECONNRESET etc. once reset */
	bool err_told;	   /* err was reported once (recv, send or SO_ERROR): as TCP after it
			    * consumed sk_err, reads now return 0 and sends fail EPIPE */
	bool anchor_dead;  /* EOF or error on the anchor (peer process gone) */
	uint8_t peer_end;  /* then, how TCP would have ended (enum san_peer_end) */
	bool gone_write;   /* a send to a peer gone by FIN was taken (TCP's reply: RST) */
	uint64_t tx_data_end; /* txr position past our last frame carrying stream bytes */
	uint32_t snd_window;  /* SO_SNDBUF the application set, 0: none (sock_windows) */
	bool tx_wait_window;  /* the last send waits for the peer to read (window full) */
	bool anchor_watch; /* the engine watches the anchor */

	bool want_edges;  /* an EPOLLET registration was made: a doorbell per arrival (rxr) */
	/*
	 * Its EPOLLET registration is the fd's only one, in a set whose waits watch the ring
	 * (core/san_rxwatch.c); edges_off: the doorbell per arrival is down meanwhile (while
	 * watched or quiet only; any arm or epoll_ctl puts it back).
	 */
	bool et_watch;
	bool edges_off;
	/*
	 * Never watched so: it has had a second number (dup: a registration through one number
	 * may outlive that number in the kernel, where the copy of the sets no longer sees it).
	 */
	bool et_never;
	uint64_t edge_seen; /* the producer index its EPOLLET registration was last reported at */
	uint32_t bells_told; /* the peer's doorbell count when the kernel's edges were last taken */
	bool rx_told_paused; /* a receive returned during PAUSED: its end re-arms (san_sock_epoll_rearm_paused) */
	/*
	 * A wait that watched the ring itself reported data while our flag was down: X was not
	 * rung for it. Cleared by the next arm (the application read) or by an announce
	 * (core/san_rxwatch.c): until then only the preload's waits know that X is readable.
	 */
	bool rx_quiet;
	/*
	 * An epoll_ctl changed or removed a registration of it while a fork shared it: a copy of
	 * that set in another process of the family may be wrong now (core/san_epshadow.h), so
	 * no wait watches its ring again (san_rxwatch.c watchable).
	 */
	bool ep_ctl_shared;
	uint32_t quiet_at; /* the progress thread's tick when it went quiet (san_rxwatch.c) */
	/* Direct grant (protocol.md "Direct grant on shm"): the application's buffer, written
	 * by the peer with process_vm_writev while a blocking receive sleeps. */
	bool direct_off;     /* a direct write failed (CMA refused): none on this connection */
	bool direct_out;     /* receiver: our offer is out (maybe claimed), not yet answered */
	bool direct_claimed; /* ... and the peer claimed it: its WRITE_DONE comes next */
	uint32_t direct_id;  /* the offer's id (nonzero, one per offer) */
	uint64_t direct_len; /* the offer's length, our own record of it */
	void *direct_buf;    /* the offered buffer (iov[0] of the receive that offered) */
	/* Direct read (protocol.md "Direct read on shm"): a blocking send's own buffer, read by
	 * the peer with process_vm_readv while the send waits. */
	bool src_off;	     /* a direct read failed (CMA refused): none on this connection */
	bool src_out;	     /* sender: our offer is out (maybe claimed), not yet settled */
	uint32_t src_id;     /* the offer's id (nonzero, one per offer) */
	uint64_t src_len;    /* its length, our own record */
	void *src_buf;	     /* the offered buffer (iov[0] of the send that offered) */
	ssize_t src_res;     /* settled by another thread (san_conn_src_drop): the result ... */
	bool src_res_pending;/* ... the offering send has still to take */
	int peer_pidfd;	     /* the peer process, or -1: a read is trusted only if it still lives */
	bool ep_overflow; /* more registrations than we can re-create: do not switch */
	bool counts_fault_done; /* SANSWITCH_FAULT=counts_busy was played on it */
	int lowat_app; /* committed, not swapped: the application's SO_RCVLOWAT (> 1), ours is 1 */
	bool cork_set; /* swapped: the application set TCP_CORK since (san_sock_tcp_cork) */
	bool cork_on;  /* and to what */
	/*
	 * Corked: DATA committed since bell_from without a look for a sleeping peer, its doorbell
	 * held until the uncork, the hold's limit, a wait for room, or the cork tick (core/san_cork.c)
	 */
	bool bell_held;
	uint32_t bell_tick; /* the cork tick when the hold began */
	uint64_t bell_from; /* the ring's producer index then */
};

/*
 * Our own number for X. After the swap the application's number names X only until the
 * application closes it (then it may name anything: a new socket of the application, or our
 * own temporary dup of another connection), so code that may run after that close (a pending
 * DISCONNECT sent by the engine, a reset) uses the number X had before the swap, which stays
 * ours until the sock is freed.
 */
static inline int san_sock_x_own(const struct san_sock *s)
{
	return s->xold >= 0 ? s->xold : s->xfd;
}

/*
 * The connection's lock. Process-shared and robust: a process that shares the connection
 * (docs/engine.md §7.1) may die holding it; the next locker takes it over (san_sock_owner_died).
 */
void san_sock_owner_died(struct san_sock *s);
void san_sock_lock_rebuild(struct san_sock *s);
/* What a lock call returned, the lock held after it: 0, EOWNERDEAD, ENOTRECOVERABLE. */
static inline void san_sock_locked(struct san_sock *s, int r)
{
	if (__builtin_expect(r == EOWNERDEAD, 0))
		san_sock_owner_died(s);
	else if (__builtin_expect(r == ENOTRECOVERABLE, 0))
		san_sock_lock_rebuild(s);
}
static inline void san_sock_lock(struct san_sock *s)
{
	san_sock_locked(s, pthread_mutex_lock(&s->lock));
}
/* The lock if free (or its owner dead: taken over); false if another holds it. */
static inline bool san_sock_trylock(struct san_sock *s)
{
	int r = pthread_mutex_trylock(&s->lock);

	if (r == EBUSY)
		return false;
	san_sock_locked(s, r);
	return true;
}
static inline void san_sock_wait(struct san_sock *s, const struct timespec *until)
{
	int r = until ? pthread_cond_timedwait(&s->cond, &s->lock, until)
		      : pthread_cond_wait(&s->cond, &s->lock);

	if (__builtin_expect(r == EOWNERDEAD || r == ENOTRECOVERABLE, 0))
		san_sock_locked(s, r);
}

/* san_sock_wait for at most ms (< 1000) milliseconds (the condition's clock: CLOCK_REALTIME). */
static inline void san_sock_wait_ms(struct san_sock *s, long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += ms * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	san_sock_wait(s, &ts);
}

/* Returned by the san_sock_* data calls: not managed (any more), make the real call. */
#define SAN_PASS (-100000)

/* The sock of a managed fd, with a reference; NULL if none. san_sock_put() when done. */
struct san_sock *san_sock_get(int fd);
void san_sock_put(struct san_sock *s);
void san_sock_hold(struct san_sock *s);

/* Does its fd number still name it (not closed meanwhile)? */
bool san_sock_current(struct san_sock *s);
/* True if fd has a sock (a retried connect() must not make a second one). */
bool san_sock_known(int fd);
/* A candidate is left on TCP (0); a switched fd cannot be (-EINVAL). For splice(). */
int san_sock_passthrough(int fd);
/* fork(): the child's copies of switched connections are orphaned (ECONNRESET). */
void san_sock_atfork_child(void);
/* fork(), before: the kernel's counts of each candidate (see san_sock.c). */
void san_sock_atfork_prepare(void);
/* fork(), in the parent: candidates are shared with the child now (forked). */
void san_sock_atfork_parent(void);
/* Around a fork() of the application (preload/san_exec.c): failed, the connections it shared are
 * the parent's alone again. */
void san_sock_fork_begin(void);
void san_sock_fork_done(bool failed);
/* A forked candidate: 0 if no other process holds it, -EBUSY, or -E2BIG (san_forked.h). */
int san_sock_forked_alone(struct san_sock *s);
/*
 * Our counts of a candidate are still the kernel's: nobody moved bytes behind our wrappers (a
 * fork's other copy, stdio, raw system calls). Lock held, none of its calls in the kernel.
 */
/* 0: our counts are the kernel's; -EXDEV: they differ; -EAGAIN: the stream moved under every read */
int san_sock_counts(struct san_sock *s);
/* A seccomp sandbox comes: candidates stay TCP; true if a connection must stay ours. */
bool san_sock_sandbox(void);
/*
 * SO_RCVLOWAT of a managed fd, set or asked (*val) by the application, under the connection's
 * lock: between its commit and its swap kept, not given to the kernel (lowat_hold in
 * san_sock.c); else the TCP socket's (the anchor's once swapped). 0, -errno, or SAN_PASS.
 */
int san_sock_rcvlowat(int fd, int *val, bool set);
/*
 * TCP_CORK set (*val) or asked (into *val) on a switched connection: kept here, not on the
 * anchor. 0, or SAN_PASS: the kernel's (not switched, or asked before any set since the swap).
 */
int san_sock_tcp_cork(int fd, int *val, bool set);
/* TCP_NODELAY was set: what a cork holds goes now (core/san_cork.h). */
void san_sock_tcp_push(int fd);
bool san_sock_counts_ok(struct san_sock *s);
/*
 * The process exits (the stats line): a connection committed to the SAN whose application
 * never read past the peer's MARK still holds its TCP number; count it as switched, with the
 * bytes it moved over TCP, as its close() would have (san_stats counts the open ones after).
 */
void san_sock_stats_exit(void);
/*
 * The process ends with connections it never closed: the kernel would close their TCP sockets
 * now (a FIN after the queued bytes; an RST with received bytes unread). Where the peer cannot
 * see our reads (verbs) that is said in the ring as close() says it, before the provider's exit
 * flush sends what is queued; shm needs nothing (the peer sees the rings: san_sock_check_anchor).
 */
void san_sock_exit_close(void);
/* The process ends: it lets go of the connections a fork shared (san_sock.c). */
void san_sock_exit_let_go(void);
/* exec(): inherited switched fds become sockets that read EOF (this process's copies only). */
void san_sock_before_exec(void);

/* A candidate's fd is about to be passed to another process (SCM_RIGHTS): it stays TCP. */
void san_sock_on_pass(int fd);
/* setsockopt(SO_SNDBUF or SO_RCVBUF) on a tracked fd succeeded (snd: which one). */
void san_sock_on_bufsize(int fd, bool snd);
/* Called by preload/ once the real call succeeded. */
void san_sock_on_connect(int fd, const struct sockaddr *to, socklen_t len);

/*
 * B, at a PROPOSE for @s, which names our end @local: if a rule of the configuration file says
 * "tcp" for a server there, the connection stays TCP (fallback reason conf) and the caller
 * REJECTs with SAN_R_POLICY. Lock not held. (A client's rule is applied at its connect().)
 */
bool san_sock_conf_refuses(struct san_sock *s, const struct san_addr *local);
void san_sock_on_accept(int lfd, int fd);
void san_sock_on_listen(int fd);
/*
 * listen() on a tracked TCP socket, before the real call: true if the providers' listeners were
 * made now (the socket is bound to a port). The caller undoes them (san_prov_unlisten) if the real
 * call fails, and does not call san_sock_on_listen after it succeeds.
 */
bool san_sock_before_listen(int fd);
/* A TCP connection inherited through exec, named by fds[0..n) (sorted): a B candidate. */
void san_sock_adopt(const int *fds, int n, uint32_t flags);
/* Before the real close of a managed fd. Returns true if the engine closed the fd itself. */
bool san_sock_on_close(int fd);
void san_sock_on_dup(int fd, int nfd);
/* Do a and b name one connection? (dup2 between two of its numbers changes nothing) */
bool san_sock_same(int a, int b);
int san_sock_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);

/*
 * The enclosing call (sendfile's copy loop) has moved bytes before the sends it makes now: a
 * signal ends those sends (their count is the call's), whatever SA_RESTART says. Per thread.
 */
void san_sock_call_moved(bool moved);
/* Data calls on managed fds: results as the kernel's (>= 0 or -errno). */
ssize_t san_sock_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t san_sock_recvmsg(int fd, struct msghdr *m, int flags);
int san_sock_shutdown(int fd, int how);
int san_sock_fionread(int fd, int *n);
/* getsockopt(SO_ERROR) on a switched fd: the pending reset, reported once; SAN_PASS if not switched. */
int san_sock_so_error(int fd, int *err);
/* The pending error to report now (lock held): s->err the first time, then eof_or_epipe. */
int san_sock_take_err(struct san_sock *s, int eof_or_epipe);
/* The TCP socket behind a switched fd, for socket options and names; -EBADF if none. */
int san_sock_anchor(int fd);
/*
 * poll/select on fd: the number to ask for POLLOUT instead (X), or -1. Only a connection whose
 * outbound ring is full while the application still holds the TCP number has one
 * (san_sock_tx_mute); san_sock_any_tx_mute() is false when none has.
 */
int san_sock_tx_wait_fd(int fd);
bool san_sock_any_tx_mute(void);

/*
 * B answers a PROPOSE only for a connection its process has touched: a data call, an
 * epoll_ctl, a poll or select that holds it. One it only accepted may be on its way to a fork
 * child (accept, fork, close: the child serves it), and the switch would be the parent's.
 * san_sock_any_untouched() is false while no candidate waits for its first touch (the wait
 * wrappers then look at nothing); san_sock_touch_fd() marks fd's candidate, if it has one.
 */
bool san_sock_any_untouched(void);
/*
 * Forks begun so far: an engine that looks at a candidate twice (a check outside its lock, the
 * switch under it) takes it at the first look and refuses the switch if it moved, since a fork
 * between the two may have given the connection to a child the first look did not see.
 */
unsigned int san_sock_fork_gen(void);
void san_sock_touch_fd(int fd);
/* Wait hint: spin on switched connections before a blocking wait (microseconds). */
unsigned int san_sock_spin_us(void);
/* A spin ended: it found something (true) or ran out (false); adapts san_sock_spin_us(). */
void san_sock_spin_result(bool found);
/* A spin ran out, and the sleep after it ended waited_ns after the wait began. */
void san_sock_spin_late(uint64_t waited_ns, bool peer_here);

/* Internal to core/: the registry and the pieces the upgrade and the data path share. */
void san_sock_drop(struct san_sock *s, unsigned int reason);
/*
 * No pause (docs/protocol.md §16): both ends proved, the peer's reader looks at our word: we
 * may commit our direction, and do at once when no call of ours is in the kernel (else at the
 * next send, or as our reader meets the peer's MARK). Lock held.
 */
void san_sock_prep_ready(struct san_sock *s);
/*
 * ... bytes of the peer's unread on TCP before its MARK, or with its way not committed (a
 * close resets then, as TCP's does). Lock held.
 */
bool san_sock_tcp_unread(struct san_sock *s);
/* ... LOOKING: the rings are ours, our reader looks at the peer's word from now on. Lock held. */
void san_sock_prep_looking(struct san_sock *s);
/*
 * ... before our commit, our reader lets go of the peer's switch-over word: 0 let go, 1 the
 * peer had committed, else its word lied. Lock held.
 */
int san_sock_prep_withdraw(struct san_sock *s, const char *why);
/* ... no more (fallen back, or withdrawn): the application's SO_RCVLOWAT back. Lock held. */
void san_sock_prep_end(struct san_sock *s);
/*
 * ... dropped before our way committed: our reader lets go of the peer's word and the
 * connection stays TCP (san_up_fallback with reason); a peer that committed already cannot be
 * let go of: reset. Lock held.
 */
void san_sock_prep_drop(struct san_sock *s, unsigned int reason);
/* The TCP peer is on this host (a loopback address, or our own). s->tuple known. */
bool san_sock_peer_on_host(const struct san_sock *s);
void san_sock_drop_fd(int fd, bool active, unsigned int reason);
void san_sock_check_anchor(struct san_sock *s);
int san_sock_swap(struct san_sock *s);
void san_sock_reset_locked(struct san_sock *s, int err, unsigned int reason);
/* A reset's RST (or, on a number the application still holds, FIN now and RST at its close) on
 * the anchor through fd, a provider's dup of it when it held the reset (hold_reset). */
void san_sock_reset_anchor(struct san_sock *s, int fd);
void san_sock_commit(struct san_sock *s);
void san_sock_reset_by_peer(struct san_sock *s, unsigned int reason);
struct san_sock *san_sock_find_tuple(const struct san_tuple *t, int *lite_busy);
void san_sock_ring_self(struct san_sock *s);
void san_sock_unplug(int yfd);
void san_sock_epoll_rearm(struct san_sock *s);
void san_sock_epoll_rearm_paused(struct san_sock *s);
void san_sock_tx_mute(struct san_sock *s);
void san_sock_tx_unmute(struct san_sock *s, bool restore);
void san_sock_send_fin(struct san_sock *s);
void san_sock_fin_sent(struct san_sock *s);
void san_sock_release_y(struct san_sock *s);
void san_sock_flush_fin(struct san_sock *s);
int san_sock_now_ms(void);
/* CLOCK_MONOTONIC in nanoseconds (the windows' deadlines). */
uint64_t san_sock_now_ns(void);
int san_fd_hide(int fd);
int san_fd_dup_hidden(int fd);

/* san_up.c: the upgrade (shm), and the pieces every provider's upgrade uses. */
int san_up_a_run(struct san_sock *s);
/*
 * No pause: wait, lock held (released while waiting), until the handshake on the engines has
 * ended for us (READY, or fallen back), at most 3 s: SANSWITCH_NOPAUSE=2's due calls (A), a
 * shutdown (A or B).
 */
void san_up_wait_prepared(struct san_sock *s);
uint64_t san_up_nonce(void);
int san_up_pair(int *x, int *y);
/*
 * Write (the rest of) our MARK right after byte X on TCP through tcp (the application's
 * number, or a provider's own dup of it), without waiting: 0, -EAGAIN (TCP's send buffer is
 * full: the engine finishes it when room comes), or -errno.
 */
int san_up_write_mark(struct san_sock *s, int tcp);
/*
 * Send now what TCP holds back on tcp (Nagle, or TCP_CORK), the application's settings put
 * back as they were.
 */
void san_up_tcp_push(int tcp);
int san_up_fallback(struct san_sock *s, unsigned int reason);
void san_up_b_fallback(struct san_sock *s, unsigned int reason);
int san_up_listen(int lfd);
/* Whether this process's engine serves the side-channel name of listener lfd. */
bool san_up_serves(int lfd);
/* A, lock held: a refusal that a later proposal may not meet (san_sock.c); false: give up. */
bool san_sock_retry_later(struct san_sock *s);
/* A: will a refusal of this proposal be followed by another (SAN_CAP_RETRIES)? Lock held. */
bool san_sock_may_retry(const struct san_sock *s);
/* B: fill s->tuple in if it is not yet (reg_lock); whether it is known. */
bool san_sock_tuple(struct san_sock *s);
/*
 * B, lock held: bind the connection's own name (see san_up.c) and set name_decided,
 * done or not (a name still in use is tried again at later calls, for a while); san_up_unname() lets it go (when s is freed), san_up_unname_child()
 * drops a fork child's copy.
 */
void san_up_name_conn(struct san_sock *s);
void san_up_unname(struct san_sock *s);
void san_up_unname_child(struct san_sock *s);
void san_up_unlisten(int lfd);
void san_up_atfork_child(void);
void san_up_watch_anchor(struct san_sock *s);
void san_up_unwatch(struct san_sock *s);
/* fork(), in the child: forget the parent engine's watchers of s (single-threaded). */
void san_up_unwatch_child(struct san_sock *s);
void san_up_watch_tx(struct san_sock *s);
/*
 * An edge-triggered registration on a number that is still the TCP socket while the peer's
 * bytes may come into our ring: the engine gives it an edge at each of their doorbells, until
 * the swap. Lock held; nothing if there is no such registration or nothing to watch yet.
 */
void san_up_watch_rx_edges(struct san_sock *s);
/* ... no more (the swap, a drop): the watcher goes. Lock held. */
void san_up_unwatch_rx_edges(struct san_sock *s);
void san_up_watch_mark(struct san_sock *s);
/*
 * Our MARK goes on TCP once the ring holds something the peer's application must see -- our
 * first stream bytes, or our DISCONNECT -- never before: the peer's reader, woken on its TCP
 * socket by the MARK, must find them there. Lock held.
 */
void san_sock_mark_flush(struct san_sock *s);

/* san_conn.c: the SAN data path, lock held. */
ssize_t san_conn_send(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t total,
		      bool may_wait);
void san_conn_iov_copy(const struct iovec *iov, int cnt, size_t off, void *buf, size_t n,
		       bool to_iov);
ssize_t san_conn_src_settle(struct san_sock *s, bool give_up);
ssize_t san_conn_src_move(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t total);
void san_conn_src_drop(struct san_sock *s);
ssize_t san_conn_recv(struct san_sock *s, const struct iovec *iov, int iovcnt, int flags);
int san_conn_post_ctrl(struct san_sock *s, uint8_t type, uint16_t reason);
int san_conn_send_hello(struct san_sock *s);
bool san_conn_rx_ready(struct san_sock *s);
/* Take the doorbells off X (before the swap: the engine's look for edges); -1: X is shut. Lock held. */
int san_conn_rx_drain_bells(struct san_sock *s);
/*
 * Before the swap, at a doorbell: has the peer committed frames into our ring since its MARK
 * reached our TCP socket, and since the last time this said so? Then an edge-triggered wait
 * on the TCP number needs an edge the kernel will not give. Lock held. 1: yes; 0: no; -1:
 * never (the peer's MARK is here and it says nothing of its frames: an older build).
 */
int san_sock_rx_edge_due(struct san_sock *s);
/*
 * Give the edge-triggered registrations an edge (EPOLL_CTL_MOD), EPOLLOUT left out of those a
 * full ring muted; the others are left alone. Lock held.
 */
void san_sock_epoll_rearm_edges(struct san_sock *s);
/* The peer's consumer has not passed our last frame carrying stream bytes (shm only). */
bool san_conn_peer_unread(struct san_sock *s);
/*
 * The inbound ring holds a message of this type ahead of the read cursor (ABORT: the peer
 * reset the connection; DISCONNECT: its FIN has come).
 */
bool san_conn_ctrl_ahead(struct san_sock *s, uint8_t type);
size_t san_conn_rx_bytes(struct san_sock *s);
/*
 * Arm for a receive (san_sock_proc.rx_armer says who stands behind the flag): for no wait
 * known (0); _mine, by a blocking receive whose spin ran out (this thread); _sleeper, by a
 * wait about to sleep in the kernel without watching the ring (SAN_RX_ARMER_SLEEPER); _rearm,
 * again, for whoever stood behind it before.
 */
int san_conn_rx_arm(struct san_sock *s);
int san_conn_rx_arm_mine(struct san_sock *s);
int san_conn_rx_arm_sleeper(struct san_sock *s);
int san_conn_rx_rearm(struct san_sock *s);
/* ... by the quiet tick: not rung for what an edge-triggered watch reported already */
int san_conn_rx_arm_tick(struct san_sock *s);
int san_conn_rx_arm_quiet(struct san_sock *s);
/*
 * Flag down and the doorbells owed taken off X (a read found the ring empty and will not sleep
 * yet): false if one owed did not land in time (X may still turn readable: arm instead).
 */
bool san_conn_rx_unarm(struct san_sock *s);
/*
 * Every sock of the process that want (NULL: any) takes, each with a reference (san_sock_put
 * each, free the array). want runs under the registry's lock, not the sock's: it may read
 * only what it can read unlocked, and its caller decides again under the sock's lock.
 */
int san_sock_all(struct san_sock ***out, bool (*want)(const struct san_sock *, void *), void *arg);
void san_conn_direct_offer(struct san_sock *s, const struct iovec *iov, int iovcnt);
bool san_conn_direct_settle(struct san_sock *s);
void san_conn_direct_drop(struct san_sock *s);
int san_conn_tx_arm(struct san_sock *s, uint32_t need);
void san_conn_tx_disarm(struct san_sock *s);
/* Ring the peer for held frames, if it sleeps for them (core/san_cork.h). Lock held. */
void san_conn_cork_flush(struct san_sock *s);
void san_conn_close(struct san_sock *s);

#endif /* SAN_SOCK_H */
