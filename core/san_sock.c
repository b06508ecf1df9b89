/* core — the managed connections: registry, candidate I/O, the swap to the SAN, close. */
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "core/san_conf.h"
#include "core/san_config.h"
#include "core/san_cork.h"
#include "core/san_core.h"
#include "core/san_epinfo.h"
#include "core/san_epoll_early.h"
#include "core/san_engine.h"
#include "core/san_epshadow.h"
#include "core/san_ev.h"
#include "core/san_rxwatch.h"
#include "core/san_fdtable.h"
#include "core/san_forked.h"
#include "core/san_lite.h"
#include "core/san_log.h"
#include "core/san_sock.h"
#include "core/san_shm_switch.h"
#include "core/san_cpuload.h"
#include "core/san_sig.h"
#include "core/san_slab.h"
#include "core/san_stats.h"
#include "core/san_stats_conn.h"
#include "core/san_sys.h"
#include "core/san_vredir.h"
#include "proto/san_msg.h"
#include "proto/san_upgrade.h"

/*
 * The registry: fd number -> sock, and a list of every sock for B's lookup by 4-tuple. A
 * reference is taken under the registry lock; data calls hold one while they run, so a
 * close() racing with them never frees a sock under their feet.
 */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct san_sock **reg;
static unsigned int reg_size;
static unsigned int b_untouched; /* B candidates not yet touched (san_sock_any_untouched) */
static struct san_sock *reg_list;

#define SAN_B_WINDOW_MS 5000 /* B: how long after accept() a PROPOSE may come */
#define SAN_A_WINDOW_MS 4000 /* A: how long after connect() it may propose (B's is longer) */

int san_sock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* The first of the high numbers (-1: none, the soft limit being too small), found once. */
static int hide_base(void)
{
	static int base;
	int b = __atomic_load_n(&base, __ATOMIC_RELAXED);

	if (!b) {
		struct rlimit rl;

		b = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 128
			    ? (int)(rl.rlim_cur / 2 < 512 ? rl.rlim_cur / 2 : 512)
			    : -1;
		__atomic_store_n(&base, b, __ATOMIC_RELAXED);
	}
	return b;
}

/*
 * The engine's own long-lived fds (side channels, doorbell sockets, anchors) move to high
 * numbers: the kernel hands out the lowest free number, and a program may count on its own
 * sockets getting small ones (a shell redirection such as >&3 takes one digit). Half the
 * soft RLIMIT_NOFILE, at most 512; a program that uses that many fds still gets them.
 * Returns the new fd (the old one is closed), or fd itself if it cannot move.
 */
int san_fd_hide(int fd)
{
	int b = hide_base(), nfd;

	if (fd < 0)
		return fd;
	if (b < 0 || fd >= b)
		return fd;
	nfd = san_sys_fcntl(fd, F_DUPFD_CLOEXEC, b);
	if (nfd < 0)
		return fd;
	san_sys_close(fd);
	san_fd_clear(nfd); /* whatever a close we never saw left in that slot */
	return nfd;
}

/*
 * A close-on-exec dup of fd, made at a high number at once: a dup made low and then hidden holds
 * the lowest free number for an instant, and a number the program takes at that instant (from
 * another thread, or while the engine thread makes it) comes out one higher than over TCP.
 */
int san_fd_dup_hidden(int fd)
{
	int b = hide_base(), nfd;

	if (b < 0)
		return san_sys_fcntl(fd, F_DUPFD_CLOEXEC, 0);
	nfd = san_sys_fcntl(fd, F_DUPFD_CLOEXEC, b);
	if (nfd < 0)
		/* every high number taken: a low one is better than none */
		return san_sys_fcntl(fd, F_DUPFD_CLOEXEC, 0);
	san_fd_clear(nfd);
	return nfd;
}

uint64_t san_sock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return san_sock_now_ns();
}

static int reg_ensure(void)
{
	unsigned int n = san_fdt.size;
	void *p;

	if (reg)
		return 0;
	if (!n)
		return -ENOMEM;
	p = mmap(NULL, (size_t)n * sizeof(*reg), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	reg = p;
	reg_size = n;
	return 0;
}

/* fd's sock, with a reference, as the registry has it (a lite candidate has none yet). */
static struct san_sock *reg_get(int fd)
{
	struct san_sock *s = NULL;

	pthread_mutex_lock(&reg_lock);
	if (reg && (unsigned int)fd < reg_size && (s = reg[fd]))
		s->proc->refs++;
	pthread_mutex_unlock(&reg_lock);
	return s;
}

static struct san_sock *lite_promote(int fd);
static struct san_lite *lite_enter_untouched(int fd, uint32_t *gen);

/*
 * fd's sock; a lite candidate's is made now (san_lite.h): whoever asks needs it. The gate is
 * looked at first: a lite's gate ends only after its sock is registered (lite_make_sock), so
 * a gate found gone means the registry has whatever there is. (The other way round, the engine
 * could make the sock between the two looks, and an epoll_ctl would go unrecorded: its swap
 * would not move the registration, and an EPOLLET waiter would miss its edges.)
 */
struct san_sock *san_sock_get(int fd)
{
	if (unlikely(san_lite_of(fd)))
		return lite_promote(fd);
	return reg_get(fd);
}

int san_sock_all(struct san_sock ***out, bool (*want)(const struct san_sock *, void *), void *arg)
{
	struct san_sock *s, **v;
	int n = 0, cap = 0;

	pthread_mutex_lock(&reg_lock);
	for (s = reg_list; s; s = s->proc->next)
		cap += !want || want(s, arg);
	v = cap ? malloc((size_t)cap * sizeof(*v)) : NULL;
	for (s = reg_list; v && s && n < cap; s = s->proc->next) {
		if (want && !want(s, arg))
			continue;
		s->proc->refs++;
		v[n++] = s;
	}
	pthread_mutex_unlock(&reg_lock);
	*out = v;
	return n;
}

/*
 * Where socks live: slots of shared chunks (core/san_slab.h), so that a fork can leave a switched
 * connection one state in both processes (docs/engine.md §7.1). A process that never forks pays
 * an mmap per 64 connections and a heap block for each one's own part.
 */
static struct san_slab sock_slab = { .size = sizeof(struct san_sock) };

static bool any_shared; /* a fork shared a connection of this process (or of its parent) */

/*
 * This process's application lets go of s (its close, its exit): the last of the processes
 * sharing it (docs/engine.md §7.1) says how it ends. Returns whether another process still uses
 * it. Once per process; atomics only (an exit may interrupt a thread that holds the lock).
 */
static bool sock_let_go(struct san_sock *s)
{
	/* (exchanged: a close under the sock's lock and the exit handler under reg_lock may race) */
	if (__atomic_exchange_n(&s->proc->let_go, true, __ATOMIC_ACQ_REL))
		return __atomic_load_n(&s->users, __ATOMIC_ACQUIRE) > 0;
	return __atomic_sub_fetch(&s->users, 1, __ATOMIC_ACQ_REL) > 0;
}

/*
 * The last process to use the connection has let go: it says DISCONNECT (or ABORT, as TCP would
 * reset) and the provider ends its part. Lock held.
 */
static void sock_end_last(struct san_sock *s)
{
	if (s->tx == SK_TX_SAN && !s->err)
		san_conn_close(s);
	if (s->committed && s->prov && s->prov->closed)
		s->prov->closed(s);
}

/* A new slot's lock and cond: process-shared (a fork may share the sock), the lock robust. */
static void sock_sync_init(struct san_sock *s)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;

	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
}

/*
 * A process that shared the connection died holding its lock, perhaps half-way through moving a
 * ring cursor or a transfer's state: nothing says the fields agree any more, and bytes delivered
 * from a torn state would be wrong bytes. So the lock is made usable again and the connection
 * reset (the peer reads ECONNRESET, as after an RST): a clean error rather than a silent one.
 */
/*
 * The lock cannot be recovered (ENOTRECOVERABLE: its owner died and the lock was let go without
 * making it consistent; our own code never does, san_sock_owner_died). Nothing may run unlocked:
 * one process builds a new lock in place (a flag in the slot says who), every other waits for it,
 * and the connection is reset, as after any death inside the lock. Returns with the lock held.
 */
void san_sock_lock_rebuild(struct san_sock *s)
{
	uint32_t gen = __atomic_load_n(&s->lock_gen, __ATOMIC_ACQUIRE);

	if (!(gen & 1) && __atomic_compare_exchange_n(&s->lock_gen, &gen, gen + 1, false,
						      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		pthread_mutex_destroy(&s->lock);
		sock_sync_init(s);
		__atomic_store_n(&s->lock_gen, gen + 2, __ATOMIC_RELEASE);
	} else {
		while (__atomic_load_n(&s->lock_gen, __ATOMIC_ACQUIRE) & 1)
			sched_yield();
	}
	san_sock_lock(s);
	san_warn("fd %d: the connection's lock was not recoverable, made again: reset", s->fd);
	if (!s->err)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_STATE);
}

void san_sock_owner_died(struct san_sock *s)
{
	pthread_mutex_consistent(&s->lock);
	san_warn("fd %d: a process sharing the connection died holding its lock: reset", s->fd);
	if (!s->err)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_STATE);
}

/*
 * This process no longer holds the slot: true if it was the last holder (the slot is free to go).
 * Once per process (its exit may come first: san_sock_exit_let_go).
 */
static bool sock_unhold(struct san_sock *s)
{
	if (__atomic_exchange_n(&s->proc->unheld, true, __ATOMIC_ACQ_REL))
		return false;
	return __atomic_sub_fetch(&s->holders, 1, __ATOMIC_ACQ_REL) == 0;
}

static void sock_free(struct san_sock *s)
{
	bool others;

	san_up_unname(s);
	if (s->proc->vnamed)
		san_vredir_drop(&s->tuple);
	if (s->side >= 0)
		san_sys_close(s->side);
	if (s->xfd >= 0 && !s->swapped)
		san_sys_close(s->xfd);
	if (s->xold >= 0)
		san_sys_close(s->xold);
	if (s->ylocal >= 0)
		san_sys_close(s->ylocal);
	if (s->ypeer >= 0)
		san_sys_close(s->ypeer);
	if (s->peer_pidfd >= 0)
		san_sys_close(s->peer_pidfd);
	if (s->swapped && s->tcp >= 0)
		san_sys_close(s->tcp);
	if (s->map)
		munmap(s->map, s->map_len);
	/* (the fds and the mapping above are this process's copies; the slot may be another's) */
	others = !sock_unhold(s);
	free(s->proc);
	if (others)
		return;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	san_slab_free(&sock_slab, s);
}

/* One more reference to s (the caller holds one already). */
void san_sock_hold(struct san_sock *s)
{
	pthread_mutex_lock(&reg_lock);
	s->proc->refs++;
	pthread_mutex_unlock(&reg_lock);
}

void san_sock_put(struct san_sock *s)
{
	bool last;

	if (!s)
		return;
	pthread_mutex_lock(&reg_lock);
	last = --s->proc->refs == 0;
	if (last) {
		struct san_sock **pp;

		for (pp = &reg_list; *pp; pp = &(*pp)->proc->next)
			if (*pp == s) {
				*pp = s->proc->next;
				break;
			}
	}
	pthread_mutex_unlock(&reg_lock);
	if (last)
		sock_free(s);
}

/*
 * Take fd's sock out of the registry; returns it with the registry's reference, or NULL.
 * With want set, only if fd still names that sock (the number may have been reused).
 */
static struct san_sock *reg_remove_if(int fd, struct san_sock *want)
{
	struct san_sock *s = NULL;

	pthread_mutex_lock(&reg_lock);
	if (reg && (unsigned int)fd < reg_size && (s = reg[fd]) && (!want || s == want))
		reg[fd] = NULL;
	else if (want)
		s = NULL;
	pthread_mutex_unlock(&reg_lock);
	return s;
}

static struct san_sock *reg_remove(int fd)
{
	return reg_remove_if(fd, NULL);
}

/*
 * B's 4-tuple, asked of the kernel the first time it is needed (a PROPOSE to find, a name to
 * bind), not at accept(): two system calls fewer for every connection that never switches.
 * Asked outside reg_lock (every data call takes it), kept under it only if the number still
 * names this sock (closed and reused meanwhile, it would be another socket's). A connection
 * that cannot say (reset already) is not asked again.
 */
static void sock_tuple_fill(struct san_sock *s)
{
	struct san_tuple t;
	int fd = __atomic_load_n(&s->fd, __ATOMIC_RELAXED);
	int r = san_owner_tuple(fd, &t);

	/* (the number asked must still be the one it goes by: closed meanwhile, with another
	 * number of the connection left, its answer says nothing; asked again next time) */
	pthread_mutex_lock(&reg_lock);
	if (!s->tuple_known && reg && fd == s->fd && (unsigned int)fd < reg_size && reg[fd] == s) {
		if (r == 0) {
			s->tuple = t;
			s->tuple_known = true;
		} else {
			s->tuple_failed = true;
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

bool san_sock_tuple(struct san_sock *s)
{
	bool r;

	pthread_mutex_lock(&reg_lock);
	r = s->tuple_known;
	pthread_mutex_unlock(&reg_lock);
	if (!r) {
		sock_tuple_fill(s);
		pthread_mutex_lock(&reg_lock);
		r = s->tuple_known;
		pthread_mutex_unlock(&reg_lock);
	}
	return r;
}

static unsigned int fork_gen; /* forks begun (san_sock_atfork_prepare): see san_sock_fork_gen */

unsigned int san_sock_fork_gen(void)
{
	return __atomic_load_n(&fork_gen, __ATOMIC_ACQUIRE);
}

bool san_sock_any_untouched(void)
{
	return __atomic_load_n(&b_untouched, __ATOMIC_RELAXED) != 0;
}

/* Past the highest number the fd table ever tracked, no number names a sock. reg_lock held. */
static unsigned int reg_numbers_end(void)
{
	unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);

	return hw < reg_size ? hw : reg_size;
}

/*
 * The fd-table flags of every number that names s: one, or several (a dup of a switched fd;
 * the numbers an inherited connection came with, san_sock_adopt). Lock held.
 */
static void sock_flags_all(struct san_sock *s, uint32_t set, uint32_t clear)
{
	(void)san_fd_set_flags(s->fd, set, clear);
	if (s->proc->fdrefs <= 1)
		return;
	pthread_mutex_lock(&reg_lock);
	for (unsigned int n = 0, end = reg_numbers_end(); reg && n < end; n++)
		if (reg[n] == s && (int)n != s->fd)
			(void)san_fd_set_flags((int)n, set, clear);
	pthread_mutex_unlock(&reg_lock);
}

/*
 * A candidate that stays TCP: its numbers other than s->fd leave the registry and pass
 * through from now on (the connection is counted through s->fd). Lock held.
 */
static void sock_drop_others(struct san_sock *s)
{
	if (s->proc->fdrefs <= 1)
		return;
	pthread_mutex_lock(&reg_lock);
	for (unsigned int n = 0, end = reg_numbers_end(); reg && n < end; n++)
		if (reg[n] == s && (int)n != s->fd) {
			reg[n] = NULL;
			s->proc->refs--;
			s->proc->fdrefs--;
			san_sock_drop_fd((int)n, s->role == SAN_UP_ROLE_A, 0);
		}
	pthread_mutex_unlock(&reg_lock);
}

/* Lock held. */
static void sock_touch(struct san_sock *s)
{
	if (s->touched || s->role != SAN_UP_ROLE_B)
		return;
	s->touched = true;
	__atomic_sub_fetch(&b_untouched, 1, __ATOMIC_RELAXED);
	if (!s->swapped)
		sock_flags_all(s, SAN_FDF_TOUCHED, 0);
}

void san_sock_touch_fd(int fd)
{
	struct san_sock *s;
	struct san_lite *l;

	/*
	 * A wait touches a lite candidate without making it a sock: a poll() is nothing that
	 * needs one, and a promotion now would leave it on TCP if another thread's call is inside.
	 * The gate first, as san_sock_get: a sock made after our store copies the mark
	 * (lite_make_sock reads it after closing the gate); one being made is waited for and
	 * touched as a sock (looking in the registry first, the engine could make the sock
	 * between the two looks, and the touch was lost).
	 */
	if ((l = san_lite_of(fd))) {
		__atomic_store_n(&l->touched, 1, __ATOMIC_SEQ_CST);
		(void)san_fd_set_flags(fd, SAN_FDF_TOUCHED, 0);
		if (!(__atomic_load_n(&l->gate, __ATOMIC_SEQ_CST) & SAN_LITE_CLOSED))
			return;
		san_lite_wait_closing(fd);
	}
	if (!(s = reg_get(fd)))
		return;
	san_sock_lock(s);
	sock_touch(s);
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
}

bool san_sock_current(struct san_sock *s)
{
	bool r;

	pthread_mutex_lock(&reg_lock);
	r = reg && s->fd >= 0 && (unsigned int)s->fd < reg_size && reg[s->fd] == s;
	pthread_mutex_unlock(&reg_lock);
	return r;
}

static void lite_make_sock(int fd, struct san_lite *l, uint32_t gen);

static bool tuple_same(const struct san_tuple *a, const struct san_tuple *b)
{
	return !memcmp(&a->local, &b->local, sizeof(a->local)) &&
	       !memcmp(&a->peer, &b->peer, sizeof(a->peer));
}

/*
 * The engine, for a PROPOSE: the lite candidate with tuple t becomes a sock, once the calls
 * inside its gate have left (san_lite_drain). Each one's tuple is asked of the kernel once.
 * NULL with *busy its number while calls are inside (BUSY: the engine asks again, or lets the
 * gate open, san_lite_undrain); NULL with *busy -1 when none has that tuple.
 */
static struct san_sock *lite_find_tuple(const struct san_tuple *t, int *busy)
{
	*busy = -1;
	for (unsigned int n = 0, end = san_lite_end_of_numbers(); n < end; n++) {
		struct san_lite *l = san_lite_of((int)n);
		uint32_t gen, g;
		int r;

		/* (a client's candidate: no PROPOSE names it, and its tuple is not asked) */
		if (!l || __atomic_load_n(&l->a_end_ns, __ATOMIC_ACQUIRE))
			continue;
		g = (uint32_t)(__atomic_load_n(&l->gate, __ATOMIC_ACQUIRE) >> 32);
		if (l->tuple_gen != g || !l->tuple_state) {
			r = san_owner_tuple((int)n, &l->tuple);
			l->tuple_state = r == 0 ? 1 : 2;
			l->tuple_gen = g;
		}
		if (l->tuple_state != 1 || !tuple_same(&l->tuple, t))
			continue;
		r = san_lite_drain((int)n, &gen);
		/*
		 * Calls inside that cannot sleep (a nonblocking one, a receive's MSG_DONTWAIT part)
		 * leave within microseconds: look again a few times now, yielding the CPU to them,
		 * before the engine's 1 ms retry (a retry, under load, can outlast the client's
		 * 50 ms wait for the answer).
		 */
		for (int k = 0; r == 0 && k < 64 && !__atomic_load_n(&l->sleepers, __ATOMIC_SEQ_CST);
		     k++) {
			sched_yield();
			r = san_lite_drain((int)n, &gen);
		}
		if (r == 0) {
			*busy = (int)n;
			return NULL;
		}
		if (r == 1)
			lite_make_sock((int)n, l, gen); /* (another connection's if the number was reused:
							   * it is a candidate then, as without lites) */
		else
			san_lite_wait_closing((int)n); /* an application thread makes it */
		return NULL; /* the registry has it now */
	}
	return NULL;
}

struct san_sock *san_sock_find_tuple(const struct san_tuple *t, int *lite_busy)
{
	bool lites_seen = false;
	int busy;

	if (lite_busy)
		*lite_busy = -1;
	/* each round asks for up to 64 unknown tuples, which are then known or never asked again */
	for (;;) {
		struct san_sock *s, *todo[64];
		int n = 0;

		pthread_mutex_lock(&reg_lock);
		for (s = reg_list; s; s = s->proc->next) {
			if (s->role != SAN_UP_ROLE_B || !reg || reg[s->fd] != s)
				continue;
			if (s->tuple_known && !memcmp(&s->tuple.local, &t->local, sizeof(t->local)) &&
			    !memcmp(&s->tuple.peer, &t->peer, sizeof(t->peer))) {
				s->proc->refs++;
				pthread_mutex_unlock(&reg_lock);
				return s;
			}
			if (!s->tuple_known && !s->tuple_failed && n < 64) {
				s->proc->refs++;
				todo[n++] = s;
			}
		}
		pthread_mutex_unlock(&reg_lock);
		if (!n && lites_seen)
			break;
		if (!n) {
			/* not a sock: perhaps a lite candidate, which then is one (look again) */
			lites_seen = true;
			lite_find_tuple(t, &busy);
			if (busy >= 0) {
				if (lite_busy)
					*lite_busy = busy;
				else
					san_lite_undrain(busy);
				return NULL;
			}
			continue;
		}
		for (int i = 0; i < n; i++) {
			sock_tuple_fill(todo[i]);
			san_sock_put(todo[i]);
		}
	}
	return NULL;
}

/*
 * A new candidate, not yet in the registry: the caller fills in what it knows, then
 * sock_register() publishes it. NULL: the fd stays plain TCP (counted).
 */
static struct san_sock *sock_alloc(int fd, int role)
{
	struct san_sock *s = NULL;

	if (!san_cfg.disable && san_prov_any() && (s = san_slab_alloc(&sock_slab)) &&
	    !(s->proc = calloc(1, sizeof(*s->proc)))) {
		san_slab_free(&sock_slab, s);
		s = NULL;
	}
	if (!s) {
		san_sock_drop_fd(fd, role == SAN_UP_ROLE_A, SAN_FB_NO_PROVIDER);
		return NULL;
	}
	s->holders = s->users = 1;
	s->fd = fd;
	s->role = role;
	s->proc->refs = 1;
	s->proc->fdrefs = 1;
	s->proc->stc = san_stats_conn_of(fd);
	s->tcp = fd;
	s->side = s->xfd = s->xold = s->ylocal = s->ypeer = s->peer_pidfd = -1;
	s->rx = SK_RX_TCP;
	s->tx = SK_TX_TCP;
	sock_sync_init(s);
	s->deadline_ns = now_ns() +
			 (role == SAN_UP_ROLE_B ? SAN_B_WINDOW_MS : SAN_A_WINDOW_MS) * 1000000ull;
	return s;
}

static void sock_register(struct san_sock *s)
{
	int fd = s->fd;

	pthread_mutex_lock(&reg_lock);
	if (reg_ensure() < 0 || (unsigned int)fd >= reg_size || reg[fd]) {
		pthread_mutex_unlock(&reg_lock);
		san_sock_drop_fd(fd, s->role == SAN_UP_ROLE_A, SAN_FB_NO_PROVIDER);
		sock_free(s);
		return;
	}
	reg[fd] = s;
	s->proc->next = reg_list;
	reg_list = s;
	if (s->role == SAN_UP_ROLE_B && !s->touched)
		__atomic_add_fetch(&b_untouched, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&reg_lock);
}

/*
 * The fd stays plain TCP from now on; its fallback is counted once, with this reason (0: it
 * is counted elsewhere, e.g. through the fd it was dup()ed from).
 */
void san_sock_drop_fd(int fd, bool active, unsigned int reason)
{
	struct san_fd *f = san_fd_get(fd);

	if (!f || !san_fd_managed_state(san_fd_state(f)))
		return;
	san_fd_set_flags(fd, SAN_FDF_COUNTED | (active ? SAN_FDF_OPENED : 0), 0);
	if (san_fd_set_state(fd, SAN_FD_CONN) >= 0 && reason && san_stats_enabled())
		san_stats_fallback(reason);
	if (unlikely(san_fd_flags(f) & SAN_FDF_STATSLOT))
		san_stats_conn_set(san_stats_conn_of(fd), SAN_CS_FALLBACK, SAN_CP_TCP, reason);
}

/*
 * A new candidate takes the registrations its number had before the connect: recorded as if
 * made now (san_sock_epoll_ctl), EPOLLET asking for a doorbell per arrival. More than we keep
 * leaves the connection on TCP (ep_overflow), as a later one would.
 */
static void sock_adopt_early(struct san_sock *s, const struct san_sock_epreg *early, int n)
{
	for (int i = 0; i < n; i++) {
		if (i == SAN_SOCK_EPOLL_MAX) {
			s->ep_overflow = true;
			break;
		}
		s->proc->ep[s->proc->nep++] = early[i];
		if (early[i].ev.events & EPOLLET)
			s->want_edges = true;
	}
}

static bool lite_wanted_a(void);
static bool a_loopback(const struct san_addr *a);

/*
 * A client's lite candidate (san_lite.h): where its sock would wait to propose (a peer on a
 * loopback address, as connect() names it: sock_before_io decides so without a system call;
 * a peer elsewhere is proposed to in the first data call, so that one is a sock at once), with
 * its peer's address for the sock. Registrations made before the connect that it cannot keep
 * (more than SAN_LITE_EPOLL_MAX) make the sock at once. True: fd is a lite candidate now.
 */
static bool lite_a_open(int fd, const struct san_addr *peer, const struct san_sock_epreg *early,
			int nearly)
{
	struct san_lite_a a = { .peer = peer, .nep = (uint32_t)nearly };
	struct san_stats_conn *stc;
	struct san_tuple t;
	unsigned int gen;

	if (nearly > SAN_LITE_EPOLL_MAX || !peer || !a_loopback(peer) || !lite_wanted_a())
		return false;
	a.end_ns = now_ns() + SAN_A_WINDOW_MS * 1000000ull; /* (as sock_alloc's deadline) */
	stc = san_stats_conn_of(fd);
	for (int i = 0; i < nearly; i++) {
		a.ep[i].epfd = early[i].epfd;
		a.ep[i].ev = early[i].ev;
	}
	gen = __atomic_load_n(&fork_gen, __ATOMIC_SEQ_CST);
	if (!san_lite_open_a(fd, stc, &a))
		return false;
	t.peer = *peer;
	san_stats_conn_set_addrs(stc, &t, SAN_CA_PEER);
	/* (a fork's prepare handler that began meanwhile may not have seen it: as on accept) */
	if (__atomic_load_n(&fork_gen, __ATOMIC_SEQ_CST) != gen)
		san_sock_put(san_sock_get(fd));
	return true;
}

void san_sock_on_connect(int fd, const struct sockaddr *to, socklen_t len)
{
	struct san_fd *f = san_fd_get(fd);
	struct san_sock_epreg early[SAN_SOCK_EPOLL_MAX];
	/* registrations made before the connect (nginx's upstream): the swap moves them too */
	int nearly = san_ep_early_take(fd, early, SAN_SOCK_EPOLL_MAX);
	struct san_sock *s;

	if (f && san_fd_state(f) == SAN_FD_ACTIVE && !(san_fd_flags(f) & SAN_FDF_DUP)) {
		struct san_addr peer;
		bool to_known = san_owner_addr(to, len, &peer) == 0;

		/* the configuration's rules, once per connection: a "tcp" one makes no candidate */
		if (to_known && san_conf_tcp(SAN_CONF_CLIENT, &peer)) {
			san_debug("fd %d: stays on TCP (a rule of the configuration file)", fd);
			san_sock_drop_fd(fd, true, SAN_FB_CONF);
			return;
		}
		/* libev, which a switched connection needs, loaded here with none of our locks held */
		if (san_ev_load() < 0) {
			san_sock_drop_fd(fd, true, SAN_FB_NO_PROVIDER);
			return;
		}
		if (lite_a_open(fd, to_known ? &peer : NULL, early, nearly))
			return;
		if (!(s = sock_alloc(fd, SAN_UP_ROLE_A)))
			return;
		sock_adopt_early(s, early, nearly);
		/* the peer's address as given: a loopback peer needs no getsockname/getpeername */
		s->to_known = to_known;
		if (to_known) {
			s->tuple.peer = peer;
			san_stats_conn_set_addrs(s->proc->stc, &s->tuple, SAN_CA_PEER);
		}
		sock_register(s);
	} else {
		san_sock_drop_fd(fd, true, SAN_R_STATE);
	}
}

/*
 * Lite candidates (san_lite.h): for a connection accepted on a listener whose name we serve
 * (the PROPOSE comes here; a worker names its connections at its first data call, which needs
 * the sock), and for a connect()ed one, in a process that is not sandboxed, where the client waits before it proposes (SANSWITCH_SWITCH_AFTER > 0: an A of 0
 * proposes before any byte, and holds its first data call for the answer, which a gate busy
 * with B's blocking receive would refuse) and no client can propose from another host (verbs'
 * A proposes in its first data call too). SANSWITCH_LITE=0 makes every candidate a sock.
 */
static bool lite_wanted(void)
{
	return san_cfg.lite && san_cfg.switch_after && !san_prov_remote() && !san_core_is_sandboxed();
}

/* A client's: its peer on this host proposes nothing from elsewhere (lite_a_open), and shm is
 * the provider its sock would try first (verbs, where there, only for a peer elsewhere). */
static bool lite_wanted_a(void)
{
	return san_cfg.lite && san_cfg.switch_after && san_prov_for_a(NULL) == &san_prov_shm &&
	       !san_core_is_sandboxed();
}

/*
 * fd's lite candidate, its gate closed by us (no call inside), becomes a sock, registered. Its
 * counts are the ones its calls took, as a sock's would be: the switch compares them with the
 * kernel's (san_sock_counts), and bytes moved behind our wrappers (C stdio's reads inside libc)
 * keep it on TCP. Without memory it stays TCP.
 */
static void lite_make_sock(int fd, struct san_lite *l, uint32_t gen)
{
	struct san_sock *s;
	bool a = l->a_end_ns != 0;

	if ((s = sock_alloc(fd, a ? SAN_UP_ROLE_A : SAN_UP_ROLE_B))) {
		s->tcp_tx = __atomic_load_n(&l->tx, __ATOMIC_RELAXED);
		s->tcp_rx = __atomic_load_n(&l->rx, __ATOMIC_RELAXED);
		if (a) {
			/*
			 * As if a sock from connect() on: its window, its policy, its peer as
			 * given, and the exchanges its sends began (a_sent, a_due).
			 */
			s->deadline_ns = l->a_end_ns;
			/* (what sock_before_io decides for a loopback peer: made here, since a
			 * shutdown that finds it due by bytes may come before any call of the sock's) */
			s->policy_set = s->late = true;
			s->to_known = l->a_peer_known;
			if (s->to_known)
				s->tuple.peer = l->a_peer;
			s->ex_sent = s->tcp_tx > 0;
			s->ex_rx0 = l->a_ex_rx0;
			s->ex_done = l->a_ex_done;
		} else {
			s->proc->name_decided = true;
		}
		s->touched = __atomic_load_n(&l->touched, __ATOMIC_RELAXED);
		if (s->touched) /* (as sock_touch: the waits look at the flag, untouched_fd) */
			(void)san_fd_set_flags(fd, SAN_FDF_TOUCHED, 0);
		s->proc->stc = l->stc;
		if (!a && l->tuple_state == 1 && l->tuple_gen == gen) {
			s->tuple = l->tuple; /* (asked by the engine for this connection) */
			s->tuple_known = true;
		}
		for (uint32_t i = 0; i < l->nep; i++) {
			struct san_sock_epreg r = { .epfd = l->ep[i].epfd, .fd = fd, .ev = l->ep[i].ev };

			sock_adopt_early(s, &r, 1); /* (an EPOLLET one asks for its edges) */
		}
		sock_register(s); /* (frees s, and leaves fd on TCP, if it cannot) */
	}
	san_lite_end(l, gen);
}

/*
 * A lite candidate is left on TCP (its gate shut, calls inside leave by themselves). Its bytes
 * are counted from the kernel at its close, as any connection's that stays TCP.
 */
static void lite_drop(int fd, unsigned int reason)
{
	bool a = san_lite_is_a(fd); /* (before the shut: the number may be reused after it) */
	uint32_t gen;

	if (san_lite_shut(fd, &gen))
		san_sock_drop_fd(fd, a, reason);
}

/*
 * Make fd's lite candidate a sock now, unless another thread's call is in the kernel: then the
 * connection stays TCP (waiting could wait for ever: a blocking receive). Another application
 * thread making it is waited for; so is the engine draining the gate, unless !wait_engine: in
 * the fork's prepare handler the engine cannot run (its own prepare handler, san_engine.c
 * fork_prepare, runs before ours and holds its loop), so the drain's next look would never
 * come, and such a connection stays TCP too.
 */
/*
 * One try at making fd's lite candidate a sock: 1 made (or no lite candidate); 0 another thread
 * (or the engine, with SAN_LITE_DRAIN in busy) was closing its gate and has decided: look
 * again; -1 a call is inside its gate.
 */
static int lite_settle_once(int fd, uint64_t busy)
{
	struct san_lite *l = san_lite_of(fd);
	uint32_t gen;

	if (!l)
		return 1;
	if (san_lite_close_gate(fd, &gen)) {
		lite_make_sock(fd, l, gen);
		return 1;
	}
	if (!(__atomic_load_n(&l->gate, __ATOMIC_ACQUIRE) & busy))
		return -1;
	san_lite_wait_closing(fd); /* another thread makes it (or the engine) */
	return 0;
}

static void lite_settle(int fd, bool wait_engine)
{
	uint64_t busy = wait_engine ? SAN_LITE_CLOSED | SAN_LITE_DRAIN : SAN_LITE_CLOSED;
	int r;

	while ((r = lite_settle_once(fd, busy)) == 0)
		;
	if (r < 0) {
		san_debug("fd %d: a call of another thread is in the kernel: stays on TCP", fd);
		lite_drop(fd, SAN_FB_NOT_ATTEMPTED);
	}
}

/*
 * Someone needs fd's sock (an epoll_ctl beyond what the lite keeps, a dup, a shutdown: all but
 * the data calls of san_sock_sendmsg/recvmsg). A reference, or NULL.
 */
static struct san_sock *lite_promote(int fd)
{
	lite_settle(fd, true);
	return reg_get(fd);
}

/*
 * Every lite candidate becomes a sock (reason 0: a fork's records are the socks'), or stays TCP
 * with that reason (SAN_LITE_CHILD: a fork child's copy, counted by the parent).
 */
#define SAN_LITE_CHILD (~0u)

static void lite_settle_all(unsigned int reason)
{
	for (unsigned int fd = 0, end = san_lite_end_of_numbers(); fd < end; fd++) {
		if (reason == SAN_LITE_CHILD) {
			/*
			 * The child's copy of a gate may be closed or draining by a thread of the
			 * parent's (an accept that raced the prepare handler's scan and is making its
			 * sock): nobody here will ever finish that. Forget it without waiting.
			 */
			bool a = san_lite_is_a((int)fd);

			if (san_lite_forget((int)fd))
				san_sock_drop_fd((int)fd, a, 0);
			continue;
		}
		if (!san_lite_of((int)fd))
			continue;
		if (reason)
			lite_drop((int)fd, reason);
		else
			lite_settle((int)fd, false);
	}
}

void san_sock_on_accept(int lfd, int fd)
{
	struct san_sock *s;
	unsigned int gen;
	bool serves;

	/* (libev, as for a connect: san_ev_load) */
	if (!san_prov_any() || san_ev_load() < 0) {
		/* no provider of this build may carry it: no window, plain TCP at once */
		san_sock_drop_fd(fd, false, SAN_FB_NO_PROVIDER);
		return;
	}
	if (!san_fd_get(fd))
		return;
	/* the PROPOSE comes to the listener's name if we serve it, else to the connection's */
	serves = san_up_serves(lfd);
	gen = __atomic_load_n(&fork_gen, __ATOMIC_SEQ_CST);
	if (serves && lite_wanted() && san_lite_open(fd, san_stats_conn_of(fd))) {
		/*
		 * A fork's prepare handler makes every lite candidate a sock (its records are
		 * socks'); one that began meanwhile may not have seen this one: now, then.
		 */
		if (__atomic_load_n(&fork_gen, __ATOMIC_SEQ_CST) != gen)
			san_sock_put(san_sock_get(fd));
		return;
	}
	if (!(s = sock_alloc(fd, SAN_UP_ROLE_B)))
		return;
	s->proc->name_decided = serves;
	sock_register(s);
}

/*
 * A connection this process was handed at exec (san_inherit.c: inetd's dup2 onto 0 and 1, a
 * forking server's EXEC, a shell's redirection), named by the numbers in fds (sorted, the
 * lowest first). It becomes a B candidate as a fork's copy does (docs/protocol.md §9.8): the
 * process that exec'd us may still hold it, and switches only once we hold it alone; its
 * counts are the kernel's now, less nothing (an accepted socket's start: if it was a connect()
 * of ours, no A proposes to it). Every number names it: the swap makes each one X.
 */
void san_sock_adopt(const int *fds, int n, uint32_t flags)
{
	uint64_t ktx, krx;
	struct san_sock *s;
	bool registered;
	int i;

	if (san_cfg.disable || !san_prov_any() || san_forked_kernel_counts(fds[0], &ktx, &krx))
		return; /* untracked: plain TCP, as every socket we did not see made */
	for (i = 0; i < n; i++)
		if (san_fd_track(fds[i], SAN_FD_PASSIVE,
				 flags | SAN_FDF_FORKED | (n > 1 ? SAN_FDF_DUP : 0)))
			break;
	if (i == n)
		(void)san_stats_conn_claim(fds[0], SAN_ROLE_SERVER);
	if (i < n || !(s = sock_alloc(fds[0], SAN_UP_ROLE_B))) {
		while (i-- > 0)
			san_sock_drop_fd(fds[i], false, i ? 0 : SAN_R_STATE);
		return;
	}
	san_stats_track();
	s->tcp_tx = ktx;
	s->tcp_rx = krx;
	s->forked = true;
	s->fork_base_ok = true; /* fork_dtx = fork_drx = 0 */
	sock_register(s); /* (frees s if it cannot) */
	pthread_mutex_lock(&reg_lock);
	registered = reg && reg[fds[0]] == s;
	for (i = 1; i < n; i++)
		if (registered && (unsigned int)fds[i] < reg_size && !reg[fds[i]]) {
			reg[fds[i]] = s;
			s->proc->refs++;
			s->proc->fdrefs++;
			s->et_never = true;
		} else {
			/* a number the swap would not follow: the connection must not switch */
			san_sock_drop_fd(fds[i], false, 0);
			if (registered)
				s->ep_overflow = true;
		}
	pthread_mutex_unlock(&reg_lock);
	if (!registered)
		return;
	san_debug("fd %d: a TCP connection handed over at exec (%d number%s), adopted: %llu bytes "
		  "out, %llu in so far", fds[0], n, n > 1 ? "s" : "", (unsigned long long)ktx,
		  (unsigned long long)krx);
}

void san_sock_on_listen(int fd)
{
	if (!san_cfg.disable && san_ev_load() == 0)
		san_prov_listen(fd);
}

/*
 * The providers' listeners (shm's side channel, verbs' rdma_cm listener) are made before the
 * kernel listens when the socket is bound to a port already: a client can connect the moment the
 * kernel listens, before the real listen() has even returned, and its PROPOSE must find them
 * there. Making them takes long the first time (the engine's start; rdma-core's load and device
 * scan): made after the kernel's listen, they were missed by a client that connects and sends at
 * once, which proposed to no one and stayed on TCP (no_peer: 3 of 14 clients spinning on
 * connect() in the rxe guest, tests/rxe/t_switch_verbs_listen.sh). A socket not bound yet gets
 * its port from listen() itself, which no client can know before it returns: its listeners
 * follow the real call (san_sock_on_listen), as before.
 */
bool san_sock_before_listen(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct san_addr a;
	int saved = errno; /* (the providers' calls may change it: the real listen() sets it) */
	bool bound;

	if (san_cfg.disable)
		return false;
	bound = SAN_SYS(SYS_getsockname, (long)fd, &ss, &len) == 0 &&
		san_owner_addr((const struct sockaddr *)&ss, len, &a) == 0 && a.port;
	if (bound)
		san_sock_on_listen(fd);
	errno = saved;
	return bound;
}

/*
 * No pause: our reader lets go of the peer's switch-over word (the peer's commit then fails,
 * and it stays on TCP), saying why with SANSWITCH_LOG=debug. san_shm_sw_withdraw's result:
 * 0 let go, 1 the peer had committed at *x, else the word lied.
 */
static int sock_withdraw(struct san_sock *s, uint64_t *x, const char *why)
{
	int r = san_shm_sw_withdraw(s->rxr.sh, x);

	san_debug("fd %d: no pause: our reader lets go of the peer's word (%s)%s", s->fd, why,
		  r == 1 ? ": the peer had committed" : r < 0 ? ": a word no state has" : "");
	return r;
}

/*
 * Before commit, the connection stays TCP: the fd becomes plain pass-through and the sock
 * leaves the registry. Lock held by the caller.
 */
void san_sock_drop(struct san_sock *s, unsigned int reason)
{
	struct san_sock *r;
	uint64_t x;

	/*
	 * Prepared without a pause (§16): the peer must not commit towards a reader that stops
	 * looking. Too late for that (it committed, or we did): reset, never a MARK read as data.
	 */
	if (s->prep && (s->committed || s->rx != SK_RX_TCP ||
			sock_withdraw(s, &x, "dropped") == 1)) {
		san_sock_commit(s);
		san_sock_reset_locked(s, -ECONNRESET, reason < 32 ? reason : SAN_R_STATE);
		return;
	}
	san_sock_prep_end(s);
	san_up_unwatch_rx_edges(s); /* (its reference would keep the sock for ever) */

	san_debug("fd %d: stays on TCP (%s)", s->fd,
		  reason < 32 ? san_reason_str((uint16_t)reason) : san_fb_name(reason));
	s->rx = SK_RX_TCP;
	s->tx = SK_TX_TCP;
	s->attempted = true;
	s->dropped = true;
	pthread_cond_broadcast(&s->cond);
	if (!s->proc->closing)
		sock_drop_others(s);
	r = s->proc->closing ? NULL : reg_remove_if(s->fd, s);
	if (r == s) {
		san_sock_drop_fd(s->fd, s->role == SAN_UP_ROLE_A, reason);
		/* The registry's reference; the caller still holds its own. */
		pthread_mutex_lock(&reg_lock);
		s->proc->refs--;
		pthread_mutex_unlock(&reg_lock);
	}
}

bool san_sock_conf_refuses(struct san_sock *s, const struct san_addr *local)
{
	if (!san_conf_tcp(SAN_CONF_SERVER, local))
		return false;
	san_sock_lock(s);
	if (!s->dropped && !s->attempted && !s->committed) {
		san_debug("fd %d: stays on TCP (a rule of the configuration file)", s->fd);
		san_sock_drop(s, SAN_FB_CONF);
	}
	pthread_mutex_unlock(&s->lock);
	return true;
}

/*
 * Past the point of no return (protocol.md §9.2). The fd table records it too: a vfork child's
 * exec reads only the table (no locks there), and must not hand on the TCP number of a
 * committed connection that was not swapped yet. Lock held.
 */
static void sock_windows(struct san_sock *s);

/*
 * SO_RCVLOWAT: the kernel makes a TCP socket readable only once that many bytes wait, and the
 * peer's MARK is 16 bytes, perhaps all that ever comes on TCP after the commit. So from the
 * commit until our MARK reader is done, the socket's low-water mark is 1 and the application's
 * value is kept here (SO_RCVLOWAT set and asked through the wrappers meanwhile:
 * san_sock_rcvlowat), then put back on the anchor at the swap. Before, a connection whose
 * application had set 100 hung at the switch: neither its poll nor ours ever saw the MARK.
 * Lock held.
 */
static void lowat_hold(struct san_sock *s)
{
	int v = s->tcp >= 0 ? san_sys_getsockopt_int(s->tcp, SOL_SOCKET, SO_RCVLOWAT) : -1;

	if (v > 1 && san_sys_setsockopt_int(s->tcp, SOL_SOCKET, SO_RCVLOWAT, 1) == 0)
		s->lowat_app = v;
}

static void lowat_release(struct san_sock *s)
{
	if (s->lowat_app > 1)
		(void)san_sys_setsockopt_int(s->tcp, SOL_SOCKET, SO_RCVLOWAT, s->lowat_app);
	s->lowat_app = 0;
}

int san_sock_rcvlowat(int fd, int *val, bool set)
{
	struct san_sock *s;
	struct san_lite *l;
	uint32_t gen;
	int r = SAN_PASS;

	/*
	 * A lite candidate's is its TCP socket's, set or read inside its gate (no sock can be made
	 * and switched meanwhile): making the sock would leave the connection on TCP if another
	 * thread's call is inside.
	 */
	if (san_lite_of(fd) && (l = lite_enter_untouched(fd, &gen))) {
		if (set)
			r = san_sys_setsockopt_int(fd, SOL_SOCKET, SO_RCVLOWAT, *val);
		else
			r = (*val = san_sys_getsockopt_int(fd, SOL_SOCKET, SO_RCVLOWAT)) < 0 ? -EBADF : 0;
		san_lite_leave(l, gen);
		return r;
	}
	if (!(s = san_sock_get(fd)))
		return SAN_PASS;
	san_sock_lock(s);
	if (s->tcp < 0) {
		/* (closing: the application's number names what it names) */
	} else if ((s->committed || s->prep) && !s->swapped) {
		if (set) {
			/* as the kernel keeps it: 0 is 1, at most half the receive buffer */
			int half = san_sys_getsockopt_int(s->tcp, SOL_SOCKET, SO_RCVBUF) / 2;

			s->lowat_app = half > 0 && *val > half ? half : *val > 1 ? *val : 0;
		} else {
			*val = s->lowat_app > 1 ? s->lowat_app : 1;
		}
		r = 0;
	} else if (set) {
		/* the TCP socket, or the anchor after the swap: under the lock, never X */
		r = san_sys_setsockopt_int(s->tcp, SOL_SOCKET, SO_RCVLOWAT, *val);
	} else {
		*val = san_sys_getsockopt_int(s->tcp, SOL_SOCKET, SO_RCVLOWAT);
		r = *val < 0 ? -EBADF : 0;
	}
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return r;
}

/*
 * TCP_CORK holds back a TCP socket's partial segments until it is taken off; it says nothing
 * about which bytes arrive or in what order. On a switched connection the bytes go through the
 * ring, where there are no segments to hold, and the anchor carries none of them: the option
 * is kept here instead of set on the anchor, and holds back only the doorbell of a corked
 * send until the uncork (core/san_cork.h). nginx (tcp_nopush)
 * corks and uncorks around every response, two system calls per request on the anchor that
 * changed nothing. Asked before any set since the swap: the anchor's value (set on TCP).
 */
int san_sock_tcp_cork(int fd, int *val, bool set)
{
	struct san_sock *s = san_sock_get(fd);
	int r = SAN_PASS;

	if (!s)
		return SAN_PASS;
	san_sock_lock(s);
	if (s->swapped && s->tcp >= 0) {
		if (set) {
			s->cork_on = *val != 0;
			s->cork_set = true;
			if (!s->cork_on)
				san_conn_cork_flush(s); /* what TCP sends at the uncork */
			r = 0;
		} else if (s->cork_set) {
			*val = s->cork_on;
			r = 0;
		}
	}
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return r;
}

void san_sock_tcp_push(int fd)
{
	struct san_sock *s = san_sock_get(fd);

	if (!s)
		return;
	san_sock_lock(s);
	san_conn_cork_flush(s);
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
}

/* The provider a connection's slot shows once it is committed to one. */
static int sock_stats_prov(const struct san_sock *s)
{
	if (!s->prov)
		return SAN_CONN_KEEP;
	return s->prov->wire == SAN_PROV_VERBS ? SAN_CP_VERBS : SAN_CP_SHM;
}

void san_sock_commit(struct san_sock *s)
{
	s->committed = true;
	/* its stream goes over the provider from here (the swap of the fd comes later, or never
	 * for a pure sender, which never reads past the peer's MARK) */
	san_stats_conn_set(s->proc->stc, SAN_CS_SWITCHED, sock_stats_prov(s), 0);
	san_stats_conn_set_addrs(s->proc->stc, &s->tuple, SAN_CA_LOCAL | SAN_CA_PEER);
	sock_flags_all(s, SAN_FDF_COMMITTED, 0);
	sock_windows(s);
	lowat_hold(s);
	san_up_watch_rx_edges(s); /* (the peer's bytes into our ring from now, before our swap) */
}

/*
 * The socket buffer sizes the application set (SO_SNDBUF, SO_RCVBUF: the kernel then stops
 * tuning them) bound what the switch keeps unread for the connection, as they bound TCP's
 * queues: our receive window goes into our inbound ring for the peer's sends to respect, our
 * send window is ours (docs/protocol.md, "Socket buffer sizes"). Sizes as the kernel reports
 * them (it doubles what was asked). Only where the provider sees the peer's reads (shm: shared
 * memory; verbs: the peer's RCV_WINDOW frames). Lock held.
 */
static uint32_t sock_buf(const struct san_sock *s, uint32_t flag, int opt)
{
	struct san_fd *f = san_fd_get(s->fd);
	int v = 0;
	socklen_t l = sizeof(v);

	if (!f || !(san_fd_flags(f) & flag) || s->tcp < 0 ||
	    SAN_SYS(SYS_getsockopt, (long)s->tcp, (long)SOL_SOCKET, (long)opt, &v, &l) < 0 || v <= 0)
		return 0;
	return (uint32_t)v;
}

static void sock_windows(struct san_sock *s)
{
	if (!s->prov || !s->prov->peer_read_to || !s->rxr.sh)
		return;
	san_shm_ring_cons_window(&s->rxr, sock_buf(s, SAN_FDF_RCVBUF, SO_RCVBUF));
	s->snd_window = sock_buf(s, SAN_FDF_SNDBUF, SO_SNDBUF);
	if (s->prov->rcv_window_set)
		s->prov->rcv_window_set(s);
}

void san_sock_on_pass(int fd)
{
	struct san_sock *s = san_sock_get(fd);

	if (!s)
		return;
	san_sock_lock(s);
	/* (prepared without a pause: the other process would read past the peer's MARK) */
	if (!s->committed && !s->swapped && !s->dropped && (!s->attempted || s->prep))
		san_sock_drop(s, SAN_R_STATE);
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
}

void san_sock_on_bufsize(int fd, bool snd)
{
	struct san_sock *s;

	(void)san_fd_set_flags(fd, snd ? SAN_FDF_SNDBUF : SAN_FDF_RCVBUF, 0);
	/*
	 * A lite candidate needs nothing more (its sock, made later, reads the flag): making it
	 * now would leave it on TCP if another thread's call is inside its gate.
	 */
	if (san_lite_of(fd))
		return;
	s = san_sock_get(fd);
	if (!s)
		return;
	san_sock_lock(s);
	sock_flags_all(s, snd ? SAN_FDF_SNDBUF : SAN_FDF_RCVBUF, 0); /* (read through s->fd) */
	if (s->committed || s->prep)
		sock_windows(s);
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
}

/*
 * The anchor's part of a reset, through fd (s->tcp, or a provider's dup of it). Lock held.
 */
void san_sock_reset_anchor(struct san_sock *s, int fd)
{
	if (fd < 0)
		return;
	if (s->swapped || s->proc->closing) {
		/*
		 * RST on the anchor now (connect to AF_UNSPEC disconnects with a reset): the
		 * peer's engine hears of it at once, even while its application only polls.
		 */
		struct sockaddr sa = { .sa_family = AF_UNSPEC };

		(void)SAN_SYS(SYS_connect, (long)fd, &sa, (long)sizeof(sa));
	} else {
		/*
		 * Still the application's own fd: keep it a connected socket (its reads report
		 * the reset through s->err); FIN now, RST when it is closed.
		 */
		struct linger lg = { 1, 0 };

		(void)SAN_SYS(SYS_setsockopt, (long)fd, (long)SOL_SOCKET, (long)SO_LINGER, &lg,
			      (long)sizeof(lg));
		(void)san_sys_shutdown(fd, SHUT_RDWR);
	}
}

/* After commit every failure resets the connection (protocol.md §9.2 rule 5). Lock held. */
static void sock_reset(struct san_sock *s, int err, unsigned int reason, bool tell_peer)
{
	if (s->err)
		return;
	s->err = err;
	if (s->committed)
		san_stats_conn_set(s->proc->stc, SAN_CS_CLOSING, SAN_CONN_KEEP, 0);
	/* frames held for a move (san_conn_src_move) never become visible: the ABORT goes first */
	san_shm_ring_prod_unhold(&s->txr);
	/* (before the swap too: a pure sender's peer reads the ring, and must meet the reset) */
	if (tell_peer && s->committed && s->txr.sh)
		(void)san_conn_post_ctrl(s, SAN_T_ABORT, (uint16_t)reason);
	/*
	 * A provider whose frames still wait in this process (verbs) resets the anchor itself
	 * once they and the ABORT are out: an RST that overtook them would make the peer drop
	 * what TCP would have delivered before the reset.
	 */
	if (!(tell_peer && s->prov && s->prov->hold_reset && s->prov->hold_reset(s)))
		san_sock_reset_anchor(s, s->tcp);
	pthread_cond_broadcast(&s->cond);
	san_sock_ring_self(s);
	san_sock_release_y(s);
	if (s->prov && s->prov->closed)
		s->prov->closed(s);
}

void san_sock_reset_locked(struct san_sock *s, int err, unsigned int reason)
{
	if (!s->err)
		san_info("fd %d: connection reset (%s)", s->fd, san_reason_str((uint16_t)reason));
	sock_reset(s, err, reason, true);
}

/* The peer's ABORT came: the same, without an ABORT back (it reset first). Lock held. */
void san_sock_reset_by_peer(struct san_sock *s, unsigned int reason)
{
	if (!s->err)
		san_info("fd %d: peer reset the connection (%s)", s->fd,
			 san_reason_str((uint16_t)reason));
	sock_reset(s, -ECONNRESET, reason, false);
}

/*
 * The notification sockets carry TCP's end-of-stream flags too, so that poll, select and
 * epoll (ours, or ones the preload cannot see) report them exactly as TCP would:
 *
 * - our DISCONNECT is out (FIN sent): shutdown(Y_peer, SHUT_WR) gives the peer's X
 *   RCV_SHUTDOWN (POLLIN | POLLRDHUP for good, as a FIN does), and shutdown(X, SHUT_WR) gives
 *   ours SEND_SHUTDOWN, so that X reports POLLHUP once both directions have ended.
 *   Doorbells still flow (they go Y -> X, which neither shutdown stops); plugs (X -> Y) are
 *   never needed again, nothing more is sent.
 * - reset: a socket whose peer socket is released with unread messages gets sk_err =
 *   ECONNRESET and both shutdown bits: POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP, TCP's
 *   flags after an RST. Our X's partner Y is held twice (our ylocal, the peer's ypeer): we put
 *   one message into Y and drop our reference; the peer drops its own when it learns of the
 *   reset (ABORT, or its anchor's RST), or the kernel does when it dies. Each side does the
 *   same for the other's X. Lock held.
 */
void san_sock_fin_sent(struct san_sock *s)
{
	int x = san_sock_x_own(s);

	san_stats_conn_set(s->proc->stc, SAN_CS_CLOSING, SAN_CONN_KEEP, 0);
	if (s->ypeer >= 0)
		(void)san_sys_shutdown(s->ypeer, SHUT_WR);
	if (x >= 0) {
		/* X cannot send once shut: leave now the message a later reset needs in Y */
		(void)san_sys_send(x, "r", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		(void)san_sys_shutdown(x, SHUT_WR);
	}
}

void san_sock_release_y(struct san_sock *s)
{
	int x = san_sock_x_own(s);

	if (s->ylocal >= 0) {
		if (x >= 0)
			(void)san_sys_send(x, "r", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		san_sys_close(s->ylocal);
		s->ylocal = -1;
	}
	if (s->ypeer >= 0) {
		san_sys_close(s->ypeer);
		s->ypeer = -1;
	}
}

/*
 * The receive side left PAUSED: a nonblocking reader may have been told EAGAIN meanwhile
 * while bytes (data, or the MARK) already sat in the TCP socket, and with EPOLLET no new edge
 * would come. EPOLL_CTL_MOD with the same events makes epoll look again and report what is
 * ready. poll/select callers ask again by themselves. EPOLLONESHOT registrations are left
 * alone: one the application has not re-armed yet must stay disabled (a MOD would enable it,
 * and a second thread could get the fd while the first still handles it), and its own re-arm
 * makes epoll look again anyway. Lock held.
 */
void san_sock_epoll_rearm(struct san_sock *s)
{
	for (int i = 0; i < s->proc->nep; i++)
		if (!(s->proc->ep[i].ev.events & EPOLLONESHOT))
			(void)san_sys_epoll_ctl(s->proc->ep[i].epfd, EPOLL_CTL_MOD, s->proc->ep[i].fd,
						&s->proc->ep[i].ev);
}

/*
 * The receive side leaves PAUSED: the re-arm above, if a receive was answered during the pause
 * (rx_told_paused). Else no receive told the application that bytes were missing, every edge it
 * took still stands for bytes it can read, and a re-arm would report the MARK, or data whose
 * edge it took already, once more: an edge the kernel never gives (a wait right after the one
 * that reported the MARK found EPOLLIN again in 11 of 20 connections). Lock held.
 */
void san_sock_epoll_rearm_paused(struct san_sock *s)
{
	if (!s->rx_told_paused)
		return;
	s->rx_told_paused = false;
	san_sock_epoll_rearm(s);
	san_debug("fd %d: epoll registrations re-armed (a receive was answered during the pause)", s->fd);
}

/*
 * A pure sender's busy loop, and how it is avoided. A connection on the SAN whose application
 * has not read since the switch still has the TCP socket under its number (the swap happens
 * only in a receive, docs/engine.md §9). The TCP socket stays writable whatever the ring
 * holds, so once a nonblocking send found the ring full, a level-triggered wait for POLLOUT
 * on that number would return at once, again and again, until the peer frees room. Until
 * then the number's epoll registrations leave EPOLLOUT out and our poll/select ask X for
 * POLLOUT instead (san_sock_tx_wait_fd). With registrations, the engine watches X and gives
 * them EPOLLOUT back when room comes (san_up_watch_tx, fin_writable); without, X's own
 * readiness is all poll/select need, and the next send that moves bytes unmutes.
 * EPOLLONESHOT registrations are never muted: giving EPOLLOUT back would take a MOD, which
 * re-enables one that has fired since (another thread would get the fd while the first still
 * handles it); such a sender re-arms and retries while the ring is full, as it would on TCP's
 * writability. Lock held.
 */
static int n_tx_mute; /* socks with tx_mute set: poll/select skip their scan at 0 */

/* The registrations a mute takes EPOLLOUT from (and gives it back to). */
static bool tx_mutable(const struct epoll_event *ev)
{
	return (ev->events & EPOLLOUT) && !(ev->events & EPOLLONESHOT);
}

void san_sock_tx_mute(struct san_sock *s)
{
	if (s->proc->tx_mute || s->swapped || s->proc->closing || (s->proc->nep && !s->proc->fw))
		return; /* registrations but no watcher: nobody would give them EPOLLOUT back */
	s->proc->tx_mute = true;
	__atomic_fetch_add(&n_tx_mute, 1, __ATOMIC_RELAXED);
	sock_flags_all(s, SAN_FDF_TXMUTE, 0);
	for (int i = 0; i < s->proc->nep; i++) {
		struct epoll_event e = s->proc->ep[i].ev;

		if (!tx_mutable(&e))
			continue;
		e.events &= ~(uint32_t)EPOLLOUT;
		(void)san_sys_epoll_ctl(s->proc->ep[i].epfd, EPOLL_CTL_MOD, s->proc->ep[i].fd, &e);
	}
}

/* Room came (restore: give the registrations their EPOLLOUT back), or the number goes. */
void san_sock_tx_unmute(struct san_sock *s, bool restore)
{
	if (!s->proc->tx_mute)
		return;
	s->proc->tx_mute = false;
	__atomic_fetch_sub(&n_tx_mute, 1, __ATOMIC_RELAXED);
	sock_flags_all(s, 0, SAN_FDF_TXMUTE);
	for (int i = 0; restore && i < s->proc->nep; i++)
		if (tx_mutable(&s->proc->ep[i].ev))
			(void)san_sys_epoll_ctl(s->proc->ep[i].epfd, EPOLL_CTL_MOD, s->proc->ep[i].fd,
						&s->proc->ep[i].ev);
}

void san_sock_epoll_rearm_edges(struct san_sock *s)
{
	for (int i = 0; i < s->proc->nep; i++) {
		struct epoll_event e = s->proc->ep[i].ev;

		if (!(e.events & EPOLLET) || (e.events & EPOLLONESHOT))
			continue; /* (a ONESHOT one: see san_sock_epoll_rearm) */
		if (s->proc->tx_mute && tx_mutable(&e))
			e.events &= ~(uint32_t)EPOLLOUT;
		(void)san_sys_epoll_ctl(s->proc->ep[i].epfd, EPOLL_CTL_MOD, s->proc->ep[i].fd, &e);
	}
}

bool san_sock_any_tx_mute(void)
{
	return __atomic_load_n(&n_tx_mute, __ATOMIC_RELAXED) != 0;
}

/*
 * The X a muted number's POLLOUT is asked of. X's number stays ours while the sock lives; if
 * the sock goes between this and the caller's poll(), the worst a reused number can do is
 * wake the caller once for nothing.
 */
int san_sock_tx_wait_fd(int fd)
{
	struct san_sock *s = san_sock_get(fd);
	int x = -1;

	if (!s)
		return -1;
	san_sock_lock(s);
	if (s->proc->tx_mute && !s->swapped) /* (any of its numbers: san_sock_get found it by fd) */
		x = s->xfd;
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return x;
}

/* Take the plugs off an X by draining its Y (docs/engine.md §5): X is writable again. */
void san_sock_unplug(int yfd)
{
	char b[4096];

	for (int i = 0; i < 16; i++)
		if (san_sys_recv(yfd, b, sizeof(b), MSG_DONTWAIT) < 0)
			break;
}

/* A zero-length message on Y makes X readable. */
void san_sock_ring_self(struct san_sock *s)
{
	if (s->ylocal >= 0)
		(void)san_sys_send(s->ylocal, "", 0, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/*
 * Its stream moved onto the SAN one way or both: we committed, or the peer did towards us (a
 * connection prepared without a pause, §16: the peer's word in our receive ring says so). Both
 * ends count such a connection as switched, whichever of them committed: the word settles the
 * race between one side's commit and the other's letting go (a close, a FIN) atomically, so
 * the two ends agree. Counted by our commit alone, a connection whose peer committed and whose
 * application then closed before committing its own way was switched at one end and a
 * fallback at the other (node's destroy() as the switch-over went on, t_app_node).
 */
static bool sock_moved(const struct san_sock *s)
{
	uint64_t x;

	return s->committed ||
	       (s->prep && s->rxr.sh && (s->rx != SK_RX_TCP || san_shm_sw_committed(s->rxr.sh, &x)));
}

/*
 * The same at an exit, which holds only the registry's lock: the peer's word is read under the
 * connection's lock (the engine may end the prepared state and unmap the rings meanwhile), if
 * that is free (the exit may interrupt a thread that holds it: then our commit alone says).
 */
static bool sock_moved_at_exit(struct san_sock *s)
{
	bool moved = s->committed;

	if (!moved && s->prep && san_sock_trylock(s)) {
		moved = sock_moved(s);
		pthread_mutex_unlock(&s->lock);
	}
	return moved;
}

/* A connection switched: counted once, and by its provider when that is not shm. */
static void count_switched(const struct san_sock *s)
{
	if (!san_stats_enabled())
		return;
	san_stats_add(SAN_STAT_SWITCHED, 1);
	if (s->prov && s->prov->wire == SAN_PROV_VERBS)
		san_stats_add(SAN_STAT_SWITCHED_VERBS, 1);
}

void san_sock_exit_close(void)
{
	struct san_sock *list[64], *s;
	int n = 0;

	/* a vfork child shares our memory, not our connections; a held lock: give up, not hang */
	if (!san_fdtable_owned() || pthread_mutex_trylock(&reg_lock))
		return;
	for (s = reg_list; s && n < 64; s = s->proc->next)
		if (s->committed && !s->proc->orphan && !s->proc->closing && !s->dropped && s->prov &&
		    !s->prov->peer_reads_seen && reg && reg[s->fd] == s) {
			s->proc->refs++;
			list[n++] = s;
		}
	pthread_mutex_unlock(&reg_lock);
	for (int i = 0; i < n; i++) {
		s = list[i];
		/* a lock held by a thread the exit interrupted is never let go: skip that one (one
		 * a dead process held is ours now, as san_sock_lock takes it) */
		if (san_sock_trylock(s)) {
			if (s->tx == SK_TX_SAN && !s->err && !s->fin_sent && !s->proc->closing)
				san_conn_close(s);
			pthread_mutex_unlock(&s->lock);
		}
		san_sock_put(s);
	}
}

/*
 * The process ends (exit, _exit) with connections a fork shared still open: it lets go of
 * them, so that the last process left says how they end at its close. Atomics only, no lock
 * waited for: it may run in a signal handler. A process killed never gets here; the others then
 * never count themselves the last, and the peer learns the end from the anchor, which the
 * kernel closes with the last copy (docs/protocol.md §13).
 */
void san_sock_exit_let_go(void)
{
	struct san_sock *s;

	if (!__atomic_load_n(&any_shared, __ATOMIC_ACQUIRE) || !san_fdtable_owned() ||
	    pthread_mutex_trylock(&reg_lock))
		return;
	for (s = reg_list; s; s = s->proc->next) {
		if (!s->committed || s->proc->orphan)
			continue;
		(void)sock_let_go(s);
		/*
		 * Its holder too: a sharer that outlived it may have freed its own part already, and
		 * would never free the slot. Last, the slot goes back now (our threads still running
		 * are in their last instants; an exec or a kill never gets here: those leave it).
		 */
		if (sock_unhold(s))
			san_slab_free(&sock_slab, s);
	}
	pthread_mutex_unlock(&reg_lock);
}

void san_sock_stats_exit(void)
{
	struct san_sock *s;

	/* the lock, if free: the exit may interrupt a thread that holds it (a signal handler) */
	if (pthread_mutex_trylock(&reg_lock))
		return;
	for (s = reg_list; s; s = s->proc->next) {
		if (!sock_moved_at_exit(s) || s->proc->closing || s->proc->orphan || s->dropped ||
		    !reg || reg[s->fd] != s)
			continue;
		/*
		 * A fork shared it and another process goes on with it (it let go of it just before:
		 * san_sock_exit_let_go): that one counts it when it ends it, not this one as well (a
		 * redis BGSAVE child, which moves no byte, counted every connection's TCP bytes).
		 */
		if (__atomic_load_n(&s->proc->let_go, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&s->users, __ATOMIC_ACQUIRE) > 0)
			continue;
		if (!s->swapped) {
			/* switched, though the application never read past the MARK (as at close);
			 * every number of it, or the others would count as a fallback too */
			for (unsigned int n = 0, end = reg_numbers_end(); n < end; n++)
				if (reg[n] == s)
					san_fd_set_state((int)n, SAN_FD_SWITCHED);
			count_switched(s);
		}
		/* what went over TCP before the switch, as a close counts it (a process that exits
		 * with the connection open: a postgres backend, socat's children) */
		san_stats_add(SAN_STAT_TCP_TX_BYTES, s->tcp_tx);
		san_stats_add(SAN_STAT_TCP_RX_BYTES, s->tcp_rx);
	}
	pthread_mutex_unlock(&reg_lock);
}

/* What the swap gives X of a registration it took off the TCP file (swap_ep_take). */
enum ep_move {
	EP_ADD,	 /* the registration as the application asked */
	EP_GONE, /* nothing: the set no longer holds it */
	EP_OFF,	 /* a disabled EPOLLONESHOT one: added disabled (swap_ep_add) */
};

/*
 * The swap takes a registration off the TCP file (the number is about to name X). A DEL that
 * finds nothing says the set no longer holds it: its epoll fd was closed (with the connection
 * still in it, which ends a registration) and the number may be another set's now, or a
 * socket's; an ADD there would put the connection in a set that never asked for it.
 * An EPOLLONESHOT registration that fired and waits for the application's MOD must stay
 * disabled, and an ADD as asked would arm it: the kernel's fdinfo says which (ino: the TCP
 * file's). If the kernel cannot say (no /proc), it is taken for armed, as before: a second event
 * is a smaller harm than a connection never reported again. (A wait in another thread that takes
 * the registration's event between the look and the DEL leaves it armed on X too: microseconds,
 * and only while the application both waits for and reads the connection at once.) The look
 * costs: the kernel prints the whole set, under the set's own lock (about 25 ms for 10,000
 * registrations, docs/engine.md), once per such registration at its connection's swap.
 */
static enum ep_move swap_ep_take(const struct san_sock_epreg *r, unsigned long ino)
{
	uint32_t events;
	bool off = false;

	if ((r->ev.events & EPOLLONESHOT) && ino &&
	    san_epinfo_events(r->epfd, r->fd, ino, &events) == 0)
		off = san_epinfo_disarmed(events);
	if (san_sys_epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->fd, NULL) < 0)
		return EP_GONE;
	return off ? EP_OFF : EP_ADD;
}

/*
 * X's registration of a disabled one: in the kernel, so that whatever the application does next
 * (a MOD that re-arms it, a DEL, an ADD, through any number of the set, in any process that
 * shares it) gets the kernel's own answer. An ADD cannot make it disabled: it asks for no event
 * but the flags, and the kernel adds EPOLLERR and EPOLLHUP to every registration, so a hang-up of
 * X (the connection's end) could report once where the disabled TCP registration would not: an
 * extra event, never a lost one. (Not after a fork: san_sock_swap.)
 */
static void swap_ep_add(const struct san_sock_epreg *r, bool disabled)
{
	struct epoll_event ev = r->ev;

	if (disabled)
		ev.events &= SAN_EPINFO_FLAGS;
	(void)san_sys_epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->fd, &ev);
}

/* The TCP file's inode (its registrations' key in the sets' fdinfo), 0 if unknown. */
static unsigned long tcp_ino(int fd)
{
	struct stat st;

	return SAN_SYS(SYS_fstat, (long)fd, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/*
 * The read side reached the peer's MARK and both directions are on the SAN: the fd number
 * becomes the notification socket X (docs/engine.md §5). The TCP socket lives on as the
 * anchor. epoll registrations of the number follow it (DEL before, ADD after), since epoll
 * keys them by open file, not by number. Lock held.
 */
int san_sock_swap(struct san_sock *s)
{
	enum ep_move move[SAN_SOCK_EPOLL_MAX];
	unsigned long ino = 0;
	int anchor, fl, fdfl, i, k;

	anchor = san_fd_dup_hidden(s->fd);
	if (anchor < 0)
		return anchor;
	/*
	 * Whether an EPOLLONESHOT registration fired is asked (swap_ep_take, the set's fdinfo: the
	 * costly look) only where the answer is used: in a process that never forked. After a fork
	 * the other process's number still names the TCP file, where its MOD would find nothing
	 * (ENOENT) and never re-arm a disabled one, so every registration is added armed, as before
	 * (an extra event at most). Without the inode no registration is looked up.
	 */
	if (!san_sock_fork_gen())
		for (i = 0; i < s->proc->nep && !ino; i++)
			if (s->proc->ep[i].ev.events & EPOLLONESHOT)
				ino = tcp_ino(s->fd);
	for (i = 0; i < s->proc->nep; i++)
		move[i] = swap_ep_take(&s->proc->ep[i], ino);
	san_sock_tx_unmute(s, false); /* the ADDs below give X the registrations as asked */
	fl = san_sys_fcntl(s->fd, F_GETFL, 0);
	fdfl = san_sys_fcntl(s->fd, F_GETFD, 0);
	/* X takes over the file flags the application set (it was made nonblocking for us). */
	(void)san_sys_fcntl(s->xfd, F_SETFL, fl >= 0 ? (fl & O_NONBLOCK) : 0);
	if (san_sys_dup3(s->xfd, s->fd, fdfl > 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		int e = -errno;

		san_sys_close(anchor);
		return e ? e : -EIO;
	}
	/*
	 * X's first number stays open until the sock goes: a thread of the application may be
	 * waiting on it right now (it read xfd before we took the lock), and the number must
	 * not be handed out to another file under it.
	 */
	s->xold = s->xfd;
	s->xfd = s->fd;
	s->tcp = anchor;
	s->swapped = true;
	san_up_unwatch_rx_edges(s); /* X's doorbells are the application's own now */
	lowat_release(s); /* the application's low-water mark, asked through the anchor from now */
	/* Numbers dup()ed from it between commit and now become X too (san_sock_on_dup). */
	if (s->proc->fdrefs > 1) {
		pthread_mutex_lock(&reg_lock);
		for (unsigned int n = 0; n < reg_size; n++) {
			int nfl;

			if (reg[n] != s || (int)n == s->fd)
				continue;
			nfl = san_sys_fcntl((int)n, F_GETFD, 0);
			if (san_sys_dup3(s->fd, (int)n, nfl > 0 && (nfl & FD_CLOEXEC) ? O_CLOEXEC : 0) >= 0)
				san_fd_set_state((int)n, SAN_FD_SWITCHED);
		}
		pthread_mutex_unlock(&reg_lock);
	}
	/* X's registrations: the ones kept are the kernel's again, the others are not ours */
	for (i = k = 0; i < s->proc->nep; i++) {
		const struct san_sock_epreg *r = &s->proc->ep[i];

		if (move[i] == EP_GONE)
			continue;
		swap_ep_add(r, move[i] == EP_OFF);
		s->proc->ep[k++] = *r;
	}
	s->proc->nep = k;
	san_fd_set_state(s->fd, SAN_FD_SWITCHED);
	count_switched(s);
	/* From now on X's readiness is the ring's: arm (or ring X if frames already wait). */
	(void)san_conn_rx_arm(s);
	san_up_watch_anchor(s);
	san_debug("fd %d: switched (%s), anchor fd %d, ports %u->%u", s->fd, s->prov ? s->prov->name : "?", anchor, s->tuple.local.port, s->tuple.peer.port);
	return 0;
}

/* ---- helpers for the data calls -------------------------------------------------------- */

static bool fd_nonblocking(int fd, int flags)
{
	struct san_fd *f;
	int fl;

	if (flags & MSG_DONTWAIT)
		return true;
	f = san_fd_get(fd);
	if (f && !(san_fd_flags(f) & SAN_FDF_DUP))
		return san_fd_flags(f) & SAN_FDF_NONBLOCK;
	fl = san_sys_fcntl(fd, F_GETFL, 0);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/*
 * What is left of a call's SO_RCVTIMEO / SO_SNDTIMEO for its next wait, in ms (-1: none): a
 * call may wait several times (a wake-up that finds nothing), and the kernel's timeout is the
 * whole call's. The first call reads the option and sets *end (0 until then).
 */
static int tcp_timeo_ms(int tcp, int opt);

static int tcp_timeo_left(int tcp, int opt, int *timeo, uint64_t *end)
{
	uint64_t now = now_ns();

	if (*timeo == -2)
		*timeo = tcp_timeo_ms(tcp, opt);
	if (*timeo < 0)
		return -1;
	if (!*end)
		*end = now + (uint64_t)*timeo * 1000000u;
	return now >= *end ? 0 : (int)((*end - now + 999999) / 1000000);
}

static int sock_timeo_left(struct san_sock *s, int opt, int *timeo, uint64_t *end)
{
	return tcp_timeo_left(s->tcp, opt, timeo, end);
}

/* SO_RCVTIMEO / SO_SNDTIMEO of the TCP socket, in ms; -1 for none. */
static int tcp_timeo_ms(int tcp, int opt)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (SAN_SYS(SYS_getsockopt, (long)tcp, (long)SOL_SOCKET, (long)opt, &tv, &len) < 0 ||
	    (!tv.tv_sec && !tv.tv_usec))
		return -1;
	return (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
}

static size_t iov_total(const struct iovec *iov, size_t cnt)
{
	size_t t = 0;

	for (size_t i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* A view of iov from byte off, at most max bytes, into out (cap entries). Returns entries. */
static int iov_slice(const struct iovec *iov, int cnt, size_t off, size_t max, struct iovec *out,
		     int cap)
{
	int n = 0;

	for (int i = 0; i < cnt && n < cap && max; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		out[n].iov_base = (char *)iov[i].iov_base + off;
		out[n].iov_len = l - off < max ? l - off : max;
		max -= out[n].iov_len;
		off = 0;
		n++;
	}
	return n;
}


/*
 * Is a connection of ours worth the switch yet (docs/protocol.md §9.7)? A short connection
 * (connect, one request, one reply, close) ends long before a switch would pay for its
 * handshake, so A proposes only once the connection has shown it will live: at a send that
 * begins its exchange number san_cfg.switch_after + 1 (a send after we have sent and then
 * received), or once SAN_SWITCH_BYTES have moved over TCP. switch_after 0 proposes in the
 * first data call, before any byte. Counted here, for A only. Lock held.
 *
 * Due by bytes in a send, A proposes only when that send would wait for TCP's buffer, at its
 * next receive, or once SAN_SWITCH_SEND_DEFER more bytes went without either (bytes_due_tx):
 * the handshake's round trip then overlaps a wait the kernel would impose anyway. A sender whose
 * data the kernel takes at once must not be held back: curl uploading 1 MB to a server that
 * answers 501 at once and closes without reading got "Broken pipe" in 8 of 10 runs (the
 * server's RST came while curl waited for the handshake), against 0 or 1 of 10 over kernel TCP,
 * where the body was all in the socket buffer before the close. (A sender that waits in poll
 * before each send, as socat does, never sees a send wait: it proposes after the deferral.)
 */
#define SAN_SWITCH_SEND_DEFER (1024u * 1024u)
#define SAN_SWITCH_BYTES (256u * 1024u)

#define SAN_A_TRIES 3
/*
 * Without a pause (§16) A's PROPOSE leaves its engine after the due send, while the exchanges
 * go on over TCP (about 10 here in the time a handshake takes; more under load): B, told so
 * by its own SANSWITCH_NOPAUSE, keeps its window open this many exchanges longer.
 */
#define SAN_NOPAUSE_LATE 32
/*
 * ... and at least this long after that last exchange: exchanges of 10 bytes between two
 * Python processes come every 20-30 us, so 32 of them are less than a handshake (400-600 us
 * idle, several ms on a loaded machine): t_switch_nopause's workers found B's window closed
 * under A's PROPOSE in 1 connection of 8, in 3 runs of 9.
 */
#define SAN_NOPAUSE_LATE_NS (50ull * 1000 * 1000)

/* B's window, past its last exchange: closed at once, or, without a pause, once that is old */
static bool b_late_enough(struct san_sock *s)
{
	uint64_t now;

	if (!san_cfg.nopause)
		return true;
	now = now_ns();
	if (!s->b_late_ns)
		s->b_late_ns = now;
	return now - s->b_late_ns >= SAN_NOPAUSE_LATE_NS;
}

/*
 * Has the peer answered the exchange we began: bytes of its came since our first send of it,
 * read or still in the socket? Still in the socket counts too: B counts an exchange by what
 * reached us (b_sent), and a full-duplex A (a writer task that runs until TCP pushes back, its
 * reader task after) may read nothing between many sends while B's replies are there. A
 * counting only what it read fell behind B, which then closed its window before A was due
 * (0 of 200 asyncio echoes switched). Lock held.
 */
static bool a_answered(struct san_sock *s)
{
	return s->tcp_rx > s->ex_rx0 || (s->tcp >= 0 && san_sys_inq(s->tcp) > 0);
}

static bool a_due(struct san_sock *s, bool send)
{
	uint64_t bytes = s->retry_bytes > SAN_SWITCH_BYTES ? s->retry_bytes : SAN_SWITCH_BYTES;

	if (send && s->ex_sent && a_answered(s)) {
		s->ex_done++;
		s->ex_sent = false;
	}
	if (send && !s->ex_sent)
		s->ex_rx_pre = s->tcp_rx; /* this send may begin an exchange: a_sent */
	s->bytes_due_tx = false;
	s->proposed_in_send = false;
	if (!send && s->retry_rx) {
		s->retry_rx = false;
		return true;
	}
	if (s->ex_done >= san_cfg.switch_after && s->ex_done >= s->ex_retry)
		return true;
	if (s->tcp_tx + s->tcp_rx < bytes)
		return false;
	/* a send: when it would wait (sock_send_would_wait), or after the deferral */
	s->bytes_due_tx = send && s->tcp_tx + s->tcp_rx < bytes + SAN_SWITCH_SEND_DEFER;
	s->proposed_in_send = send && !s->bytes_due_tx; /* (the proposal that follows, if any) */
	return !s->bytes_due_tx;
}

/*
 * The process that answered our PROPOSE does not hold the connection: its owner has not named
 * it yet (a worker that accepted it and made no data call on it so far); or the owner's
 * receive was in the kernel, where it cannot be paused (BUSY: sock_direct); or no answer came
 * within SAN_UP_RETRY_TIMEOUT_MS (an older build holding it for an accept()). Try again at the
 * next exchange, or after another SAN_SWITCH_BYTES, a few times. Lock held; false: give up.
 */
bool san_sock_retry_later(struct san_sock *s)
{
	/* (a sandboxed process may not propose again: san_core_sandboxed) */
	if (s->role != SAN_UP_ROLE_A || !s->late || ++s->up_tries >= SAN_A_TRIES || s->last_try ||
	    san_core_is_sandboxed())
		return false;
	s->attempted = false;
	s->due_waits = false;
	/*
	 * What our TCP holds back goes now: the owner's receive refused us sleeping in the kernel
	 * (BUSY), and it returns, so that its next one waits where our next try finds it
	 * (lite_b_may_be_due), only once bytes of ours reach it. A client that acknowledges each
	 * piece of one reply had its small acknowledgements kept by Nagle through all three tries:
	 * 0-1 of 10 such connections switched.
	 */
	if (s->tcp >= 0)
		san_up_tcp_push(s->tcp);
	san_stats_conn_set(s->proc->stc, SAN_CS_CANDIDATE, SAN_CONN_KEEP, 0);
	s->ex_retry = s->ex_done + 1;
	s->retry_bytes = s->tcp_tx + s->tcp_rx + SAN_SWITCH_BYTES;
	/*
	 * Refused in a send due by bytes (a bulk sender): its next receive proposes again. The
	 * reply to an upload may come whole into one receive, and 256 KiB later would then never
	 * come (t_switch_policy "bulk": 1 connection in 8 stayed TCP on a loaded CI machine, its
	 * first proposal refused BUSY while the server's receive was in the kernel).
	 */
	s->retry_rx = s->proposed_in_send;
	san_debug("fd %d: its owner did not answer yet: proposing again later", s->fd);
	return true;
}

/* Will a refusal of the proposal about to go be followed by another (SAN_CAP_RETRIES)? */
bool san_sock_may_retry(const struct san_sock *s)
{
	return s->role == SAN_UP_ROLE_A && s->late && s->up_tries + 1 < SAN_A_TRIES && !s->last_try;
}

/*
 * B, about to send on TCP: may this send begin an exchange? Only one that answers everything A
 * had sent: nothing of A's waits unread in our socket as it begins (docs/protocol.md §9.7).
 * What A sends after our bytes reached it, A counts as an exchange too (a_answered) and has
 * proposed before when due. A send made while A's bytes wait (a full-duplex stream: both ends
 * write at once) begins none: B counted those, A did not, and B closed its window before A
 * was due. Looked at before the send: after it, a request-reply peer's next request is often
 * there already (its reader, woken by our send, answers before our call returns). One FIONREAD
 * per exchange, while the window is open. Lock held.
 */
static void b_send_begins(struct san_sock *s)
{
	if (s->role == SAN_UP_ROLE_B && !s->ex_sent && s->tcp_rx && !s->attempted && s->tcp >= 0)
		s->ex_quiet = san_sys_inq(s->tcp) == 0;
}

/*
 * Sent on TCP: the exchange it belongs to has begun. A's begins at its send (the bytes it had
 * received before that send: a_due, taken before a direct send went to the kernel, so that a
 * reply another thread reads meanwhile answers this exchange). B's, at a send that answered
 * all A had sent (b_send_begins): a server's greeting, sent before it received anything,
 * begins none (A counts its exchanges from its own first send). Lock held.
 */
static void a_sent(struct san_sock *s)
{
	if (s->ex_sent)
		return;
	if (s->role == SAN_UP_ROLE_A) {
		s->ex_sent = true;
		s->ex_rx0 = s->late ? s->ex_rx_pre : s->tcp_rx;
	} else if (s->ex_quiet) {
		s->ex_sent = true;
		s->ex_quiet = false;
		s->ex_rx0 = s->tcp_rx;
	}
}

/*
 * Only a peer on this host may wait for the connection to show it lives: one across the
 * fabric (verbs) is proposed to in the first data call, before any byte, as before.
 */
static bool a_loopback(const struct san_addr *a)
{
	return (san_addr_is_v4(a) && a->addr[12] == 127) ||
	       !memcmp(a->addr, in6addr_loopback.s6_addr, sizeof(a->addr));
}

/* The tuple's peer is on this host: a loopback address, or our own address. */
static bool peer_on_host(const struct san_tuple *t)
{
	return a_loopback(&t->peer) || !memcmp(t->peer.addr, t->local.addr, sizeof(t->peer.addr));
}

bool san_sock_peer_on_host(const struct san_sock *s)
{
	return peer_on_host(&s->tuple);
}

/*
 * B: may the peer propose over shm (a name of our own is worth its socket and its fd then)?
 * On this host, and shm allowed. Lock held.
 */
static bool b_peer_shm(struct san_sock *s)
{
	return san_prov_by_wire(SAN_PROV_SHM) && san_sock_tuple(s) && peer_on_host(&s->tuple);
}

/* -ENOTCONN: a nonblocking connect() still in progress, decide at a later call. */
static int a_peer_local(struct san_sock *s, bool *local)
{
	int r;

	if (s->to_known && a_loopback(&s->tuple.peer)) {
		*local = true;
		return 0;
	}
	r = san_owner_tuple(s->fd, &s->tuple);
	if (r == -ENOTCONN)
		return r;
	*local = r == 0 && peer_on_host(&s->tuple);
	return 0;
}

/*
 * Calls that go to the kernel as the application made them (blocking or not; signals, timeouts
 * and MSG_WAITALL as they are), only their counts taken under the lock (sock_direct). Before,
 * every call on a candidate took the candidate's path (MSG_DONTWAIT, then poll, then again):
 * two system calls more for every receive that waited, and a new connection's first request
 * paid them at both ends.
 *
 * A, not due yet: nothing can change under its calls, since A proposes only in a data call of
 * its own, and not while another thread's call is in the kernel (in_kernel: sock_before_io).
 *
 * B's receives, while it has sent nothing and received less than a quarter of what makes A
 * due by bytes (a first request): A cannot be due by exchanges then (it has received nothing),
 * and a PROPOSE that comes while such a receive is in the kernel, where it cannot be paused, is
 * held briefly or refused BUSY (san_up.c, b_receive_returns_soon; A proposes again later:
 * san_sock_retry_later). Only under the policy that makes A wait (SANSWITCH_SWITCH_AFTER > 0:
 * an A of its own configuration with 0 proposes before any byte, and does not propose again),
 * and only where no PROPOSE can come from another host (verbs proposes in the first data call
 * too). B's sends stay on the candidate's path: its
 * switch-over offset is taken by the engine, which cannot wait for a send in the kernel.
 */
static bool sock_direct_ok(const struct san_sock *s, bool send)
{
	if (s->attempted || s->dropped || s->rx != SK_RX_TCP || s->tx != SK_TX_TCP)
		return false;
	/*
	 * (A due by bytes in a send: that send must see its EAGAIN: a_due. Due while another
	 * thread's call was in the kernel: no call goes there any more, so the next one that
	 * finds none there proposes; a writer and a reader each blocked in the kernel in turn
	 * would otherwise never leave that moment to either.)
	 */
	if (s->role == SAN_UP_ROLE_A)
		return s->late && !s->bytes_due_tx && !s->due_waits;
	return !send && san_cfg.switch_after && !s->tcp_tx && s->tcp_rx < SAN_SWITCH_BYTES / 4 &&
	       !san_prov_remote();
}

/*
 * Application bytes moved over TCP on a candidate (lock held): our count, which the switch-over
 * offsets come from, and the connection's sanstat slot.
 */
static void sock_tcp_moved(struct san_sock *s, bool tx, uint64_t n)
{
	if (tx)
		s->tcp_tx += n;
	else
		s->tcp_rx += n;
	if (s->proc->stc)
		san_stats_conn_add(tx ? &s->proc->stc->tcp_tx : &s->proc->stc->tcp_rx, n);
}

/*
 * (Through the caller's own number, which names the TCP socket too: another number of the
 * connection may be closed by another thread while this call is in the kernel.)
 */
static ssize_t sock_direct(struct san_sock *s, int fd, struct msghdr *m, int flags, bool send)
{
	ssize_t r;

	s->in_kernel++;
	pthread_mutex_unlock(&s->lock);
	r = san_sys_io(fd, m, flags, send);
	san_sock_lock(s);
	s->in_kernel--;
	if (r > 0 && send) {
		sock_tcp_moved(s, true, (uint64_t)r);
		a_sent(s);
	} else if (r > 0 && !(flags & MSG_PEEK)) {
		sock_tcp_moved(s, false, (uint64_t)r);
	}
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return r;
}

/*
 * A proposes only with its counts the kernel's (san_sock_counts_ok), and a forked A only alone
 * (san_sock_atfork_prepare); while another process holds the connection (a parent that has not
 * closed its copy yet), at a later exchange. A connect() still in SYN_SENT (verbs proposes in
 * the first data call, which may come before the handshake ends) is not asked yet. Lock held;
 * false: not now (perhaps dropped).
 */
static bool sock_kernel_diff(struct san_sock *s, int64_t *dtx, int64_t *drx);
static void sock_learn_peer(struct san_sock *s);

static bool a_may_propose(struct san_sock *s)
{
	int r;

	if (s->forked) {
		r = san_sock_forked_alone(s);

		if (r == -EBUSY && san_sock_retry_later(s))
			return false;
		if (r) {
			san_sock_drop(s, SAN_R_STATE);
			return false;
		}
	}
	r = san_sock_counts(s);
	if (!r)
		return true;
	if (san_log_enabled(SAN_LOG_DEBUG)) {
		int64_t dtx = 0, drx = 0;
		bool got = sock_kernel_diff(s, &dtx, &drx);

		san_debug("fd %d: our counts are not the kernel's (%s: %lld, %lld)", s->fd,
			  got ? "differences" : "not readable", (long long)dtx, (long long)drx);
	}
	/* the stream moved under every read (a bulk transfer in full flow): at a later call */
	if (r == -EAGAIN && san_sock_retry_later(s))
		return false;
	if (!s->forked && !s->tcp_tx && !s->tcp_rx) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);

		if (SAN_SYS(SYS_getpeername, (long)s->tcp, &ss, &len) == -ENOTCONN)
			return false;
	}
	san_sock_drop(s, SAN_R_STATE);
	return false;
}

static void a_propose_now(struct san_sock *s, const struct san_prov_ops *p);

/*
 * A's upgrade runs in a data call once due; B's window may have closed. Lock held. True when
 * the upgrade ran in this call (a signal handler may have run meanwhile: san_sig.h); then
 * *rx_empty, when asked, says whether TCP held no byte to receive as it began (the kernel's
 * receive would have slept).
 */
static bool sock_before_io(struct san_sock *s, bool send, bool *rx_empty)
{
	sock_touch(s);
	sock_learn_peer(s);
	if (s->prep_gone && !s->dropped) {
		s->prep_gone = false;
		san_sock_drop(s, SAN_R_STATE); /* a fork came while it was prepared */
		return false;
	}
	if (s->role == SAN_UP_ROLE_A && !s->attempted) {
		const struct san_prov_ops *p = san_prov_for_a(NULL);

		if (san_cfg.switch_after && !s->policy_set && p == &san_prov_shm) {
			bool local;

			if (a_peer_local(s, &local) == -ENOTCONN)
				return false; /* a nonblocking connect still in progress */
			s->policy_set = true;
			s->late = local;
		}
		if (s->late && now_ns() > s->deadline_ns) {
			san_sock_drop(s, SAN_FB_NOT_ATTEMPTED); /* B's window is closing */
			return false;
		}
		if (s->late && !a_due(s, send))
			return false;
		if (s->late && s->in_kernel) {
			s->due_waits = true;
			return false;
		}
		if (rx_empty) {
			char c;

			*rx_empty = san_sys_recv(s->tcp, &c, 1, MSG_PEEK | MSG_DONTWAIT) == -EAGAIN;
		}
		a_propose_now(s, p);
		return true;
	}
	else if (s->role == SAN_UP_ROLE_B && !s->attempted && s->rx == SK_RX_TCP &&
		 s->tx == SK_TX_TCP) {
		if (now_ns() > s->deadline_ns)
			san_sock_drop(s, SAN_FB_NOT_ATTEMPTED);
		else if (!s->proc->name_decided && b_peer_shm(s))
			san_up_name_conn(s);
		else if (!s->proc->name_decided) {
			s->proc->name_decided = true;
			san_prov_name_conn(s); /* (verbs: a listener of this process's own) */
		}
	}
	return false;
}

/*
 * A send of A's, due by bytes, found TCP's buffer full (a_due): propose now, while the call
 * would have waited anyway. True when the call must look again (the connection may be on the
 * SAN now). Lock held.
 */
static bool sock_send_would_wait(struct san_sock *s)
{
	if (s->role != SAN_UP_ROLE_A || !s->bytes_due_tx || s->attempted || s->dropped ||
	    s->in_kernel)
		return false;
	s->proposed_in_send = true;
	a_propose_now(s, san_prov_for_a(NULL));
	return s->attempted || s->dropped; /* (else nothing changed: the call waits as it would) */
}

/*
 * A's shutdown of its sends, due by bytes and not proposed yet: propose first. A sender whose
 * bytes the kernel took at once never saw a send wait (a_due defers to that wait), and its
 * reader may not have run yet: an asyncio writer task sends its 1 MiB and write_eof()s before
 * the reader task's first receive (the peer's reply, all of it, still to come). The shutdown
 * ended the window there, and the connection stayed TCP. That proposal is A's last (the window
 * ends with the shutdown: last_try), so it goes without SAN_CAP_RETRIES: B takes a connection
 * it has accepted and not touched yet, or holds it briefly for its accept(), where it refused
 * a proposal that another would follow (a busy server had not read a byte of a connection
 * whose client had sent 1.8 MB and shut down). Due once SAN_SWITCH_BYTES moved, even when a
 * refused try set a later mark (retry_bytes spaces the tries while calls are to come; after
 * the shutdown none may come): a writer refused in a send (no answer in time on a loaded
 * host) at 1.37 of its 1.61 MB, its reader not run yet, shut down before the mark and stayed
 * TCP (t_switch_duplex, 1 run in 10 with two CPU hogs). Lock held.
 */
static bool a_due_at_shutdown(struct san_sock *s)
{
	return s->role == SAN_UP_ROLE_A && s->late && !s->attempted && !s->dropped &&
	       !s->in_kernel && s->rx == SK_RX_TCP && s->tx == SK_TX_TCP &&
	       s->tcp_tx + s->tcp_rx >= SAN_SWITCH_BYTES && now_ns() <= s->deadline_ns;
}

/*
 * A, due: the counts checked, then each provider in turn from p, the first allowed (none: the
 * connection stays TCP). Lock held.
 */
static void a_propose_now(struct san_sock *s, const struct san_prov_ops *p)
{
	san_sig_forget(); /* the caller takes what this upgrade notes, and only that (san_sig.h) */
	if (!p) {
		san_sock_drop(s, SAN_FB_NO_PROVIDER);
		return;
	}
	if (!a_may_propose(s))
		return;
	/*
	 * A switched connection needs the progress thread (its anchor watched, its peer's death
	 * seen): one that cannot start leaves the connection on TCP now, not reset after the commit.
	 */
	if (san_engine_start() < 0) {
		san_sock_drop(s, SAN_FB_NO_PROVIDER);
		return;
	}
	/*
	 * Each provider in turn until one finds the peer (shm: on this host; verbs: RDMA). A
	 * connection proposed late (a peer on this host, bytes moved already) is shm's alone:
	 * verbs proposes before the first byte and would refuse it as STATE.
	 */
	san_stats_conn_set(s->proc->stc, SAN_CS_UPGRADING, SAN_CONN_KEEP, 0);
	for (; p && !(s->late && p != &san_prov_shm); p = san_prov_for_a(p)) {
		s->prov = p;
		if (p->propose(s) != SAN_PROV_NO_PEER)
			return;
	}
	san_sock_drop(s, SAN_FB_NO_PEER);
}

/* ---- the no-pause switch-over (docs/protocol.md §16; core/san_shm_switch.h) ---------- */

/* Yields a commit that must happen waits for a peer's reader inside a receive, at most. */
#define SAN_SW_TRIES_MUST 20000
/* ... and one at a send, which may go on TCP instead and try again at the next */
#define SAN_SW_TRIES 4
/* ... and a shutdown's, the last chance, looks again a millisecond apart this long */
#define SAN_SW_SHUT_NS (30ull * 1000 * 1000)

/*
 * Dropped before our direction committed: the connection stays on TCP. Our reader lets go of
 * the peer's word first; one the peer committed already cannot be let go (its bytes are in
 * the ring, its MARK on TCP) while ours stay on TCP: reset. Lock held.
 */
void san_sock_prep_drop(struct san_sock *s, unsigned int reason)
{
	uint64_t x;

	if (s->rx == SK_RX_TCP && sock_withdraw(s, &x, san_reason_str((uint16_t)reason)) != 1) {
		san_up_fallback(s, reason);
		return;
	}
	san_sock_commit(s);
	san_sock_reset_locked(s, -ECONNRESET, reason);
}

/*
 * Our direction commits alone: X is what we sent on TCP, the ring carries the rest, and our
 * MARK follows our first bytes there (mark_due). must: our reader is at the peer's MARK, and
 * the swap needs both directions off TCP, so keep trying while the peer's reader is inside a
 * receive (microseconds: they do not sleep); else a send tries briefly, and its bytes go on
 * TCP if the peer's reader is inside. Lock held; 0, -EBUSY (not now), or -errno (the
 * connection stays on TCP, or was reset).
 */
static int sock_commit_tx(struct san_sock *s, bool must)
{
	int r;

	if (s->fin_sent) {
		/*
		 * Our end went on TCP: nothing more goes our way. At the peer's MARK the
		 * connection is switched all the same (its end, the anchor, our Y as for a commit).
		 */
		if (!must)
			return -EPIPE;
		san_sock_commit(s);
		return 0;
	}
	if (!must) {
		/*
		 * Our way only: X is our count of what went on TCP, which must be the kernel's
		 * (nothing moved behind our wrappers). The other way is the word's and the MARK's
		 * to check (and the kernel counts the peer's FIN as a byte received).
		 */
		int64_t dtx = 0, drx = 0;

		if (!sock_kernel_diff(s, &dtx, &drx))
			return -EBUSY; /* a stream in full flow: at a later send */
		if (s->forked ? !s->fork_base_ok || dtx != s->fork_dtx
			      : dtx != (s->role == SAN_UP_ROLE_A ? 1 : 0)) {
			san_debug("fd %d: no commit: we sent %lld bytes more than we know of", s->fd,
				  (long long)dtx);
			san_sock_prep_drop(s, SAN_R_STATE);
			return -EXDEV;
		}
	}
	r = san_shm_sw_commit(s->txr.sh, s->tcp_tx, must ? SAN_SW_TRIES_MUST : SAN_SW_TRIES);
	if (r == -EBUSY && !must)
		return r;
	if (r == -ECANCELED && !must) {
		san_sock_prep_drop(s, SAN_R_STATE); /* the peer let go (a fork, a close) */
		return r;
	}
	if (r < 0) {
		/* (busy: the peer's reader stayed inside a receive, its thread stopped or gone) */
		san_sock_commit(s);
		san_sock_reset_locked(s, -ECONNRESET, r == -EBUSY ? SAN_R_TIMEOUT : SAN_R_PROTOCOL);
		return -ECONNRESET;
	}
	san_sock_commit(s);
	s->tx = SK_TX_SAN;
	s->mark_due = true;
	if (san_conn_send_hello(s) < 0) {
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
		return -ECONNRESET;
	}
	san_debug("fd %d: committed at %llu (no pause)", s->fd, (unsigned long long)s->tcp_tx);
	return 0;
}

/*
 * No pause: the peer's X once it committed, learned without a receive (a sender that never
 * reads must know what its anchor means, as after the paused switch-over). Lock held.
 */
/*
 * The peer committed at x: our receives drain TCP to it, then its MARK. An x below what we
 * have read is a lie (false; the caller resets, or leaves it to the next receive's look).
 */
static bool sock_take_x(struct san_sock *s, uint64_t x)
{
	if (x < s->tcp_rx)
		return false;
	s->x_peer = x;
	s->rx = SK_RX_DRAIN;
	san_debug("fd %d: the peer committed at %llu (no pause)", s->fd, (unsigned long long)x);
	return true;
}

static void sock_learn_peer(struct san_sock *s)
{
	uint64_t x;

	if (s->prep && s->rx == SK_RX_TCP && san_shm_sw_committed(s->rxr.sh, &x))
		(void)sock_take_x(s, x);
}

int san_sock_rx_edge_due(struct san_sock *s)
{
	uint64_t mark, prod;
	int inq = 0;

	sock_learn_peer(s);
	if (s->swapped || s->rx != SK_RX_DRAIN || !s->rxr.sh || s->tcp < 0)
		return 0;
	if (s->mark_have < SAN_MARK_LEN &&
	    (SAN_SYS(SYS_ioctl, (long)s->tcp, (long)FIONREAD, &inq) < 0 ||
	     s->tcp_rx + (uint64_t)inq < s->x_peer + SAN_MARK_LEN - s->mark_have))
		return 0; /* not all here yet: its arrival is the edge for all before it */
	/*
	 * Read once the MARK is here: the sender wrote it before the MARK's first byte (an
	 * earlier value, from a first try that sent nothing, is below it). 0 then: a peer
	 * that predates the field; nothing to give, nothing more to watch for.
	 */
	mark = atomic_load_explicit(&s->rxr.sh->mark_prod, memory_order_acquire);
	if (!mark)
		return -1;
	prod = atomic_load_explicit(&s->rxr.sh->prod, memory_order_acquire);
	if (prod <= mark - 1 || prod <= s->edge_prod)
		return 0;
	s->edge_prod = prod;
	return 1;
}

/*
 * No pause: do bytes of the peer's wait unread on TCP, ahead of its MARK (or with its way
 * still on TCP)? A close then resets, as the kernel's does with bytes unread. The peek comes
 * before the look at the peer's word: the peer sets its X before it writes its MARK, so
 * bytes seen by the peek that may be that MARK are known to be it after the look. Lock held.
 */
bool san_sock_tcp_unread(struct san_sock *s)
{
	char b;

	if (!s->prep || s->rx != SK_RX_TCP || s->tcp < 0 ||
	    san_sys_recv(s->tcp, &b, 1, MSG_DONTWAIT | MSG_PEEK) <= 0)
		return false;
	sock_learn_peer(s);
	return s->rx == SK_RX_TCP || s->tcp_rx < s->x_peer;
}

void san_sock_prep_looking(struct san_sock *s)
{
	s->prep = SK_PREP_LOOKING;
	/* our window in our inbound ring before the peer can commit (at READY: it writes at once) */
	sock_windows(s);
	/* the peer's MARK may be all that comes on TCP from its commit on, which we learn of late */
	lowat_hold(s);
}

int san_sock_prep_withdraw(struct san_sock *s, const char *why)
{
	uint64_t x;

	return sock_withdraw(s, &x, why);
}

void san_sock_prep_end(struct san_sock *s)
{
	if (!s->prep)
		return;
	s->prep = SK_PREP_NONE;
	if (!s->committed)
		lowat_release(s);
}

void san_sock_prep_ready(struct san_sock *s)
{
	s->prep = SK_PREP_READY;
	san_up_watch_rx_edges(s); /* (the peer may commit its way from now on) */
	/* (a call of ours in the kernel, begun before: the next send commits, or our reader) */
	if (s->tx == SK_TX_TCP && !s->err && !s->in_kernel && !s->proc->closing)
		(void)sock_commit_tx(s, false);
	if (!s->proc->closing)
		san_sock_epoll_rearm_paused(s);
	pthread_cond_broadcast(&s->cond);
}

/*
 * Before a TCP receive while the peer may commit: hold its word, or learn its X. Lock held.
 * 1: held (receive, then sock_look_end); 0: the peer committed, rx drains to its X now;
 * -ECONNRESET: the word lied (a value no state has, an X below what we read): reset.
 */
static int sock_look(struct san_sock *s)
{
	uint64_t x = 0;
	int r = san_shm_sw_read_begin(s->rxr.sh, &x);

	if (r == 0)
		return 1;
	if (r == 1 && sock_take_x(s, x))
		return 0;
	san_sock_commit(s);
	san_sock_reset_locked(s, -ECONNRESET, SAN_R_PROTOCOL);
	return -ECONNRESET;
}

static void sock_look_end(struct san_sock *s)
{
	/* (the bytes received are TCP's, and ours; the reset comes with the next call) */
	if (san_shm_sw_read_end(s->rxr.sh) < 0) {
		san_sock_commit(s);
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_PROTOCOL);
	}
}

/*
 * Read the peer's MARK once every byte before it was delivered; on success the receive side
 * moves to the SAN and the fd is swapped. 0: done; -EAGAIN: not all 16 bytes yet; other:
 * the connection was reset. Lock held.
 */
static int sock_read_mark(struct san_sock *s)
{
	/*
	 * No pause: the swap needs our direction off TCP too. B's, once A's SWITCH is in (its
	 * engine takes it: -EINPROGRESS, the caller waits as for a pause): the MARK says A
	 * committed, which it does only after sending it.
	 */
	if (s->prep && s->tx == SK_TX_TCP) {
		if (s->prep != SK_PREP_READY)
			return -EINPROGRESS;
		if (sock_commit_tx(s, true) < 0)
			return -ECONNRESET;
	}
	while (s->mark_have < SAN_MARK_LEN) {
		long r = san_sys_recv(s->tcp, s->mark + s->mark_have, SAN_MARK_LEN - s->mark_have,
				      MSG_DONTWAIT);

		if (r == -EINTR)
			continue;
		if (r == -EAGAIN)
			return -EAGAIN;
		if (r <= 0 && !s->mark_have && (r == 0 || r == -ECONNRESET) && s->prov &&
		    s->prov->peer_reads_seen && !san_conn_ctrl_ahead(s, SAN_T_ABORT) &&
		    !san_conn_peer_unread(s))
			/*
			 * The peer's process ended after the switch-over without a byte for us
			 * (a MARK goes with its first stream bytes or its DISCONNECT) and had read
			 * all we sent: the stream ends here, as its kernel's FIN ends TCP.
			 */
			return -ESHUTDOWN;
		if (r <= 0) {
			san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
			return -ECONNRESET;
		}
		s->mark_have += (unsigned int)r;
	}
	if (san_mark_check(s->mark, SAN_PROTO_VERSION, s->nonce_mine) != 0) {
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_MARK);
		return -ECONNRESET;
	}
	s->rx = SK_RX_SAN;
	if (san_sock_swap(s) < 0) {
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_CHANNEL);
		return -ECONNRESET;
	}
	if (s->prov && s->prov->mark_read)
		s->prov->mark_read(s); /* what the MARK went after: the receive must find it */
	return 0;
}

/*
 * Wait outside the lock for fd to become ready, or for the anchor of a switched connection
 * to report the peer's end. 1: look again; 0: timed out; -EINTR: a signal handler ran and
 * the call must end as the kernel's would (san_sig.h); WAIT_RESTART: a handler ran that asks
 * for restart, with no timeout on the socket: the call goes on, unless it has moved bytes
 * already (the kernel's returns the count then, SA_RESTART or not).
 */
#define WAIT_RESTART 2

/*
 * Bytes the enclosing call moved before this send began: sendfile() copies chunk by chunk,
 * each chunk one send, and a signal that would restart a send that has moved nothing must end
 * the sendfile() that has (san_sock_call_moved).
 */
static __thread bool call_moved;

void san_sock_call_moved(bool moved)
{
	call_moved = moved;
}
static int wait_fd(struct san_sock *s, int fd, short ev, int timeout_ms, bool after_upgrade)
{
	/*
	 * The TCP socket says when the peer's process is gone: the anchor, once swapped, reads
	 * EOF or an error; before that (a pure sender still holds the TCP number, the peer's
	 * MARK unread in it) only its hang-up flags may be asked for.
	 */
	bool peer = s->committed && s->tcp >= 0 && s->tcp != fd;
	/*
	 * (no pause, the peer's way still on TCP: its FIN there ends its stream and says nothing
	 * of the peer; only an error or a hang-up does)
	 */
	struct pollfd p[2] = { { fd, ev, 0 },
			       { peer ? s->tcp : -1,
				 s->swapped ? POLLIN : s->rx == SK_RX_TCP ? 0 : POLLRDHUP, 0 } };
	struct san_sig_mark sm;
	bool sleeper;
	int r;

	if (after_upgrade && (r = san_sig_take_noted(timeout_ms >= 0)) != 0)
		return r < 0 ? r : WAIT_RESTART; /* a handler ran during the upgrade */
	san_sig_mark(&sm);
	sleeper = timeout_ms != 0 && san_prov_sleep_begin();
	r = san_sys_poll(p, peer ? 2 : 1, timeout_ms);
	san_prov_sleep_end(sleeper);

	if (r > 0 && p[1].revents) {
		san_sock_lock(s);
		san_sock_check_anchor(s);
		pthread_mutex_unlock(&s->lock);
	}
	if (r == -EINTR)
		return san_sig_restarts_since(&sm, timeout_ms >= 0) ? WAIT_RESTART : -EINTR;
	return r > 0;
}

/*
 * Where the peer's reads are not seen (verbs): has its DISCONNECT come, read, in the inbound
 * ring, or held by the provider behind a full ring (an ABORT held there too)? Then the stream
 * ends in its own words, and an RST on the anchor after it says nothing more: a sender that
 * never read left our MARK unread, so its kernel resets TCP at its exit after an orderly end
 * (TCP's reader would get every byte, then EOF: the FIN came before the RST). Lock held.
 */
static bool peer_said_end(struct san_sock *s)
{
	return s->peer_fin || san_conn_ctrl_ahead(s, SAN_T_DISCONNECT) ||
	       (s->prov && s->prov->peer_said_end && s->prov->peer_said_end(s));
}

/* After the MARK nothing but EOF or an error can come on the anchor: the peer has gone. */
void san_sock_check_anchor(struct san_sock *s)
{
	char b;
	long r;

	if (!s->committed || s->anchor_dead || s->tcp < 0)
		return;
	sock_learn_peer(s);
	if (s->swapped) {
		r = san_sys_recv(s->tcp, &b, 1, MSG_DONTWAIT | MSG_PEEK);
		if (r == -EAGAIN || r == -EINTR)
			return;
	} else {
		/* still the application's TCP socket: the peer's MARK may wait there unread */
		struct pollfd p = { s->tcp, s->rx == SK_RX_TCP ? 0 : POLLRDHUP, 0 };

		if (san_sys_poll(&p, 1, 0) <= 0)
			return;
		r = p.revents & POLLERR ? -ECONNRESET : 0;
	}
	if (s->prov && s->prov->progress) {
		/* what the peer sent before it went must be in the ring before EOF is believed */
		s->prov->progress(s);
	}
	s->anchor_dead = true;
	/*
	 * The anchor ends when the peer's process lets go of its last copy: a close() (its
	 * DISCONNECT or ABORT is in the ring before), or an exit, a kill, a crash, an exec, with
	 * nothing said. The kernel then ends TCP with a FIN, or an RST if the process left bytes
	 * unread. Where the rings are shared, what the peer had read is in them, whatever the
	 * anchor says (an RST there may only mean that the peer left our MARK unread: a process
	 * that only sent never read it). Decided now, before any later send of ours could be
	 * taken for bytes it left unread.
	 */
	if (!s->prov || !s->prov->peer_reads_seen)
		/* an ABORT in the ring is a reset the peer asked for, whether its reads are seen
		 * or not (verbs: its close with bytes of ours unread, as TCP's RST says) */
		s->peer_end = san_conn_ctrl_ahead(s, SAN_T_ABORT) ? SK_PEER_RST : SK_PEER_UNKNOWN;
	else if (san_conn_ctrl_ahead(s, SAN_T_ABORT) || san_conn_peer_unread(s) ||
		 (r == -ECONNRESET && (s->mark_out < SAN_MARK_LEN || s->tx_data_end)))
		/*
		 * A reset it asked for (its ABORT ends what we read; or none fitted in a full
		 * ring, and then only the RST says it), or bytes of ours unread. An RST is the
		 * peer's own unless our lone MARK (we sent no stream bytes, only our end) may
		 * have been left unread there: a peer that read any byte of ours read it.
		 */
		s->peer_end = SK_PEER_RST;
	else
		s->peer_end = SK_PEER_FIN;
	san_debug("fd %d: the anchor reports %s: the peer is gone (%s)", s->fd,
		  r > 0 ? "data after the MARK" : r == 0 ? "EOF" : strerror((int)-r),
		  s->peer_end == SK_PEER_FIN ? "it read all we sent" :
		  s->peer_end == SK_PEER_RST ? "it left bytes unread" : "its reads are not seen");
	if (r == -ECONNRESET && s->peer_end == SK_PEER_UNKNOWN && !peer_said_end(s)) {
		/* The peer reset (an RST follows its ABORT): say so now, as TCP does. */
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_APP_RESET);
	} else if (s->peer_end == SK_PEER_RST) {
		/* TCP's RST shows at once (POLLERR, POLLHUP), the data before it still readable */
		san_sock_release_y(s);
	} else if (s->peer_end == SK_PEER_FIN && s->ylocal >= 0) {
		/* and a FIN as POLLIN | POLLRDHUP (the peer said nothing that would have shown it) */
		(void)san_sys_shutdown(s->ylocal, SHUT_WR);
	}
	/* Readable and writable from now on: every waiter comes to hear the news. */
	san_sock_ring_self(s);
	if (s->ylocal >= 0)
		san_sock_unplug(s->ylocal);
}

/* A nonblocking read found the ring empty and leaves the flag up (counted: shm_empty_arms). */
static int empty_arm(struct san_sock *s)
{
	/* (an ended stream's arm puts no flag up: X stays ready) */
	if (s->prov && s->prov->wire == SAN_PROV_SHM && !s->err && !s->peer_fin && !s->anchor_dead)
		san_stats_add(SAN_STAT_SHM_EMPTY_ARMS, 1);
	return san_conn_rx_arm(s);
}

/* Spin on the rings first: sleeping in the kernel costs more than a short wait (SPIN_US). */
static bool spin_for(struct san_sock *s)
{
	unsigned int us = san_sock_spin_us();
	uint64_t now = now_ns(), end = now + (uint64_t)us * 1000u;

	if (!us || san_cpuload_crowded(now))
		return false;
	for (bool spun = false;; spun = true) {
		if (s->prov && s->prov->spin_poll)
			s->prov->spin_poll(s);
		if (san_conn_rx_ready(s) || __atomic_load_n(&s->err, __ATOMIC_RELAXED) ||
		    s->anchor_dead) {
			if (spun) /* ready at once says nothing about waiting */
				san_sock_spin_result(true);
			return true;
		}
		__builtin_ia32_pause();
		if (now_ns() >= end)
			break;
	}
	san_sock_spin_result(false);
	return false;
}

/*
 * The start of a data call: the fd's sock with a reference (*sp), and the bytes asked for.
 * Returns 1 to go on; otherwise the call's result: SAN_PASS (no sock: plain TCP from now on),
 * -ECONNRESET (a fork child's orphaned copy), 0 (nothing asked for: TCP returns 0 at once).
 */
/*
 * A fork child's candidate (or a connection the fork shared) gets its stats slot when the child first moves data on it: the
 * child's file starts empty (san_stats_conn.h), and a child that only execs or closes what it
 * inherited (most do) makes no file for it. A forking server's child serving the connection
 * shows it from its first call. Takes the lock.
 */
static void sock_stats_child_claim(struct san_sock *s)
{
	san_sock_lock(s);
	if (s->proc->stc_child && !s->proc->closing) {
		s->proc->stc = san_stats_conn_claim(s->fd, s->role == SAN_UP_ROLE_A ? SAN_ROLE_CLIENT
									     : SAN_ROLE_SERVER);
		if (s->tuple_known)
			san_stats_conn_set_addrs(s->proc->stc, &s->tuple, SAN_CA_LOCAL | SAN_CA_PEER);
		/* a connection the fork shared is switched already: the child's file says so */
		if (s->committed)
			san_stats_conn_set(s->proc->stc, SAN_CS_SWITCHED, sock_stats_prov(s), 0);
	}
	__atomic_store_n(&s->proc->stc_child, false, __ATOMIC_RELAXED);
	sock_flags_all(s, 0, SAN_FDF_INHERITED); /* the child's own from now on */
	pthread_mutex_unlock(&s->lock);
}

static ssize_t sock_io_begin(int fd, const struct msghdr *m, struct san_sock **sp, size_t *total)
{
	struct san_sock *s = san_sock_get(fd);

	*sp = s;
	if (!s) {
		san_sock_drop_fd(fd, false, 0);
		return SAN_PASS;
	}
	if (s->proc->orphan) {
		san_sock_put(s);
		return -ECONNRESET;
	}
	if (unlikely(__atomic_load_n(&s->proc->stc_child, __ATOMIC_RELAXED)))
		sock_stats_child_claim(s);
	if (__builtin_expect(s->proc->watch_due, 0) &&
	    __atomic_exchange_n(&s->proc->watch_due, false, __ATOMIC_ACQ_REL)) {
		/* a fork shared it: this process's engine watches the anchor too (the parent may go) */
		san_up_watch_anchor(s);
	}
	*total = iov_total(m->msg_iov, m->msg_iovlen);
	if (!*total) {
		san_sock_put(s);
		return 0;
	}
	return 1;
}

/* ---- lite candidates' data calls (san_lite.h) ---------------------------------------------- */

/* Bytes a lite candidate's call moved over TCP: the stats at its close, its sanstat slot. */
static void lite_moved(struct san_lite *l, bool tx, uint64_t n)
{
	__atomic_add_fetch(tx ? &l->tx : &l->rx, n, __ATOMIC_RELAXED);
	if (l->stc)
		san_stats_conn_add(tx ? &l->stc->tcp_tx : &l->stc->tcp_rx, n);
	if (tx && !__atomic_load_n(&l->sent, __ATOMIC_RELAXED))
		__atomic_store_n(&l->sent, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&l->last_tx, __ATOMIC_RELAXED) != tx)
		__atomic_store_n(&l->last_tx, tx, __ATOMIC_RELAXED);
	if (tx && !l->a_end_ns) /* B: each send may answer an exchange (lite_b_may_be_due) */
		__atomic_add_fetch(&l->b_ex, 1, __ATOMIC_RELAXED);
}

/*
 * Enter fd's gate, waiting while it is being closed or drained (a few system calls, or up to
 * 20 ms while the engine waits for a receive inside that has bytes to return). NULL: fd is no
 * lite candidate (any more): the sock's path.
 */
static struct san_lite *lite_enter_untouched(int fd, uint32_t *gen)
{
	struct san_lite *l;

	while (!(l = san_lite_enter(fd, gen))) {
		if (!san_lite_of(fd))
			return NULL;
		san_lite_wait_closing(fd);
	}
	return l;
}

/* ... for a data call, which touches the connection (san_up.c: not waiting for a fork child) */
static struct san_lite *lite_enter(int fd, uint32_t *gen)
{
	struct san_lite *l = lite_enter_untouched(fd, gen);

	if (l)
		__atomic_store_n(&l->touched, 1, __ATOMIC_RELAXED);
	return l;
}

/*
 * A blocking call on a lite candidate that would sleep in the kernel waits outside the gate
 * instead (poll), and moves each part inside it with MSG_DONTWAIT: a PROPOSE that comes while it
 * waits must find no call inside (a receive once A may be due waits for A's next request,
 * before which A proposes; a send held by a full buffer waits for A to read, and A waits for the
 * answer). That is the candidate's discipline (docs/engine.md §3) without the sock.
 * SO_RCVTIMEO/SO_SNDTIMEO, a signal (restarted or EINTR: san_sig_restarts_since), MSG_WAITALL and a
 * send's whole length as the kernel's call has them. False: the gate is gone and nothing was
 * moved (the sock's path does the call).
 */
static bool lite_wait_io(int fd, struct msghdr *m, int flags, bool send, bool wait_first,
			 ssize_t *out)
{
	size_t total = iov_total(m->msg_iov, m->msg_iovlen), done = 0;
	bool all = send || ((flags & MSG_WAITALL) && !(flags & MSG_PEEK));
	bool wait_next = wait_first;
	int timeo = -2;
	uint64_t tend = 0;
	ssize_t r;

	for (;;) {
		struct iovec sl[64];
		struct msghdr mh = *m;
		struct san_lite *l;
		uint32_t gen;

		if (wait_next) {
			struct pollfd p = { fd, send ? POLLOUT : POLLIN, 0 };
			int w = tcp_timeo_left(fd, send ? SO_SNDTIMEO : SO_RCVTIMEO, &timeo, &tend);
			struct san_sig_mark sm;

			if (w == 0) {
				if (done)
					break;
				*out = -EAGAIN;
				return true;
			}
			wait_next = false;
			san_sig_mark(&sm);
			if (san_sys_poll(&p, 1, w) == -EINTR) {
				if (done)
					break;
				if (san_sig_restarts_since(&sm, w >= 0))
					continue;
				*out = -EINTR;
				return true;
			}
		}
		mh.msg_iov = sl;
		mh.msg_iovlen = (size_t)iov_slice(m->msg_iov, (int)m->msg_iovlen, done, total - done,
						  sl, 64);
		if (!(l = lite_enter(fd, &gen))) {
			ssize_t k;

			/* made a sock meanwhile: the sock's path does the call, or moves the rest */
			if (!done)
				return false;
			if (!all || done >= total)
				break;
			/* (a short count only at a signal, an error or the end, as TCP's) */
			k = send ? san_sock_sendmsg(fd, &mh, flags) : san_sock_recvmsg(fd, &mh, flags);
			if (k == SAN_PASS) /* (left on TCP meanwhile: the kernel's call) */
				k = send ? san_sys_sendmsg(fd, &mh, flags) : san_sys_recvmsg(fd, &mh, flags);
			if (k > 0)
				done += (size_t)k;
			if (!send)
				m->msg_flags = mh.msg_flags;
			break;
		}
		r = san_sys_io(fd, &mh, send ? flags | MSG_DONTWAIT : (flags & ~MSG_WAITALL) | MSG_DONTWAIT,
			       send);
		if (r > 0 && (send || !(flags & MSG_PEEK)))
			lite_moved(l, send, (uint64_t)r);
		san_lite_leave(l, gen);
		if (!send)
			m->msg_flags = mh.msg_flags;
		if (r > 0) {
			done += (size_t)r;
			if (!all || done >= total)
				break;
			continue;
		}
		if ((r == 0 && !send) || (r != -EAGAIN && done))
			break;
		if (r != -EAGAIN) {
			*out = r;
			return true;
		}
		wait_next = true;
	}
	*out = (ssize_t)done;
	return true;
}

/*
 * Could a call of A's lite candidate be due (a_due)? A send that begins its exchange
 * san_cfg.switch_after + 1; any call, once its calls moved enough that the bytes' rule may
 * soon apply (the sock then counts the rest exactly); or an earlier due call found the gate
 * busy. *answered: a send that completes the current exchange (lite_a_exchange counts it).
 */
static bool lite_a_due(int fd, struct san_lite *l, bool send, bool *answered)
{
	bool late;

	*answered = false;
	if (!send || !__atomic_load_n(&l->sent, __ATOMIC_RELAXED))
		return __atomic_load_n(&l->a_want, __ATOMIC_RELAXED) ||
		       __atomic_load_n(&l->tx, __ATOMIC_RELAXED) +
				       __atomic_load_n(&l->rx, __ATOMIC_RELAXED) >=
			       SAN_SWITCH_BYTES / 4;
	/*
	 * Past A's window the sock is made (and left on TCP at its first call, sock_before_io)
	 * rather than a FIONREAD paid at every send of a sender that is never answered, which
	 * the sock does not pay.
	 */
	late = now_ns() > l->a_end_ns;
	/*
	 * A later send completes an exchange if the peer answered since it began (a_answered:
	 * bytes read, or waiting in the socket); one that continues a request (a length, then
	 * its body) does not. Asked whatever else makes the call due: if the sock cannot be made
	 * now (another call inside), this send still counts (lite_a_exchange). The sock is made at
	 * the send that would begin the exchange the policy proposes at: the exchanges before cost
	 * a lite's calls, not a sock's (a client of 16 requests, both ends preloaded: 17 % more CPU
	 * than over TCP with the sock made at its second).
	 */
	if (!late)
		*answered = __atomic_load_n(&l->rx, __ATOMIC_RELAXED) > l->a_ex_rx0 ||
			    san_sys_inq(fd) > 0;
	return late || __atomic_load_n(&l->a_want, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&l->tx, __ATOMIC_RELAXED) + __atomic_load_n(&l->rx, __ATOMIC_RELAXED) >=
		       SAN_SWITCH_BYTES / 4 ||
	       (*answered && l->a_ex_done + 1 >= san_cfg.switch_after);
}

/*
 * A send of A's lite candidate that moved bytes: the exchanges, as a sock counts them (a_due,
 * a_sent), for the sock made later. Its first send begins the first exchange; a later one
 * completes one if the peer answered since the current one began (lite_a_due's *answered),
 * and begins the next; rx0, what had come before the send began. Counted once the send went
 * (a sock's a_sent: a send that fails begins nothing). Inside the gate, so racy only against
 * other threads' sends, whose order the kernel does not give either.
 */
static void lite_a_exchange(struct san_lite *l, bool first, bool answered, uint64_t rx0)
{
	if (first) {
		l->a_ex_rx0 = rx0;
	} else if (answered) {
		l->a_ex_done++;
		l->a_ex_rx0 = rx0;
	}
}

/*
 * B's lite candidate: may its peer be due by now, so that a blocking receive must wait outside
 * the gate (where a PROPOSE's drain can close it)? Not before B's first send (A cannot be due
 * by exchanges before our reply), and, as long as neither way has moved a quarter of what makes
 * A due by bytes, not before B has made switch_after - 1 sends (b_ex): A proposes at the send
 * that begins its exchange switch_after + 1, once B's bytes reached it switch_after times, each
 * time bytes of a later send of B's, unless A reads one send of B's in pieces and answers each
 * (then the engine's BUSY marks the candidate: b_outside); one exchange of slack. Until then a
 * receive sleeps in the kernel as over TCP (a server's connection of 16 requests cost 2 more
 * system calls a request: SO_RCVTIMEO read, then poll). Counting B's sends that followed bytes
 * of A's instead fell behind a client acknowledging each of a burst of B's sends (the engine
 * then met the one receive asleep at all three of A's tries: 1 of 5 such connections stayed
 * TCP under a CPU hog).
 */
static bool lite_b_may_be_due(const struct san_lite *l, uint32_t gen)
{
	if (__atomic_load_n(&l->b_outside, __ATOMIC_RELAXED) == gen ||
	    __atomic_load_n(&l->rx, __ATOMIC_RELAXED) >= SAN_SWITCH_BYTES / 4 ||
	    __atomic_load_n(&l->tx, __ATOMIC_RELAXED) >= SAN_SWITCH_BYTES / 4)
		return true;
	return __atomic_load_n(&l->sent, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&l->b_ex, __ATOMIC_RELAXED) + 1 >= san_cfg.switch_after;
}

/*
 * A's lite candidate is due: its sock now, if no other call is inside the gate (true: made, or
 * being made by another thread; the sock's path follows). Else another thread's call is inside
 * (perhaps a receive asleep until the peer answers the very request this call would send):
 * the connection stays lite for this call, and the first call that finds the gate free makes
 * the sock.
 */
static bool lite_a_make_sock(int fd)
{
	struct san_lite *l;

	if (lite_settle_once(fd, SAN_LITE_CLOSED) >= 0)
		return true;
	if ((l = san_lite_of(fd)))
		__atomic_store_n(&l->a_want, 1, __ATOMIC_RELAXED);
	return false;
}

/*
 * A data call on a lite candidate goes to the kernel as the application made it, inside the
 * gate (no count of ours: the kernel's are taken when a sock is made). True with *out the
 * call's result; false: no lite candidate, the sock's path.
 */
static bool lite_io(int fd, struct msghdr *m, int flags, bool send, ssize_t *out)
{
	struct san_lite *l;
	uint32_t gen;
	ssize_t r;
	bool may_sleep, a, waits_outside, answered = false, first = false;
	uint64_t rx0 = 0;

	if (!(l = lite_enter(fd, &gen)))
		return false;
	a = l->a_end_ns != 0;
	if (a && lite_a_due(fd, l, send, &answered)) {
		san_lite_leave(l, gen);
		if (lite_a_make_sock(fd))
			return false; /* the sock's path: it decides whether to propose */
		if (!(l = lite_enter(fd, &gen)))
			return false;
	}
	if (a && send) {
		first = !__atomic_load_n(&l->sent, __ATOMIC_RELAXED);
		rx0 = __atomic_load_n(&l->rx, __ATOMIC_RELAXED);
	}
	may_sleep = !fd_nonblocking(fd, flags);
	/*
	 * B's blocking sends wait outside the gate, for a PROPOSE, and so do its receives once
	 * the peer may be due (lite_b_may_be_due; by bytes: as sock_direct_ok; an upload in one
	 * send then a shutdown proposed at the shutdown, and was refused BUSY while the server's
	 * receive slept in the kernel). A's
	 * sleep in the kernel inside it (nothing outside needs the gate) until a due call found
	 * another call inside: from then on they wait outside too, so that the gate empties
	 * between calls and the next call makes the sock (a reader thread's receive and a
	 * writer's send each still inside as the other came kept it from ever emptying).
	 */
	waits_outside = a ? __atomic_load_n(&l->a_want, __ATOMIC_RELAXED) != 0
			  : send || lite_b_may_be_due(l, gen);
	if (may_sleep && waits_outside && m->msg_iovlen <= 64) {
		/*
		 * A receive right after a send waits before it looks: it waits for the peer's
		 * answer, a round trip away, and a look first would be a system call that finds
		 * nothing (sanconnrate's server: 3 calls for the wait for the client's close,
		 * not 4). After a receive, the rest of a request is usually there: look first.
		 */
		bool wait_first = !send && __atomic_load_n(&l->last_tx, __ATOMIC_RELAXED);

		if (a && send) /* (A's with a_want: its sock comes at the next free gate) */
			lite_a_exchange(l, first, answered, rx0);
		san_lite_leave(l, gen);
		return lite_wait_io(fd, m, flags, send, wait_first, out);
	}
	/*
	 * Left: a blocking receive of B's before its peer may be due (lite_b_may_be_due), in the
	 * kernel (a first request, and a short connection's later ones, cost what they cost over
	 * TCP). The engine,
	 * draining the gate for a PROPOSE, waits for calls that cannot sleep, and for such a
	 * receive only while bytes wait for it (san_up.c, b_receive_returns_soon). (A's: no
	 * engine drains its gate.)
	 */
	if (may_sleep && !a)
		__atomic_add_fetch(&l->sleepers, 1, __ATOMIC_SEQ_CST);
	r = san_sys_io(fd, m, flags, send);
	if (may_sleep && !a)
		__atomic_sub_fetch(&l->sleepers, 1, __ATOMIC_SEQ_CST);
	if (r > 0 && a && send)
		lite_a_exchange(l, first, answered, rx0);
	if (r > 0 && (send || !(flags & MSG_PEEK)))
		lite_moved(l, send, (uint64_t)r);
	san_lite_leave(l, gen);
	*out = r;
	return true;
}

/* ---- send ------------------------------------------------------------------------------ */

/*
 * Our blocking send offered its buffer (protocol.md "Direct read on shm"): wait on X (the
 * peer's report drains our plugs) for it to be read, at most SAN_CONN_SRC_WAIT_MS while it is
 * only offered, as long as the read takes once claimed (or until the peer's process is gone).
 * Lock held; dropped while waiting. The bytes read, or moved into the ring when the peer did
 * not come (*moved), 0 (taken back: the area takes them), or an error.
 */
#define SAN_SOCK_SRC_WAIT_NS (2u * 1000000u)

static ssize_t src_wait(struct san_sock *s, const struct iovec *iov, int iovcnt, size_t total,
			bool *moved)
{
	uint64_t until = now_ns() + SAN_SOCK_SRC_WAIT_NS;

	*moved = false;
	for (;;) {
		uint64_t now = now_ns();
		bool late = now >= until || s->err || s->proc->closing;
		ssize_t r;
		int x = s->xfd;

		/*
		 * Not taken in time: the bytes go through the ring instead, moved there in the same
		 * step that takes the offer back (the peer, woken for them, must not find them
		 * gone in between). The offer is as it was if that could not be done (claimed
		 * meanwhile; or a reset, the peer gone): then the settle below decides.
		 */
		if (late && (r = san_conn_src_move(s, iov, iovcnt, total)) > 0) {
			*moved = true;
			return r;
		}
		r = san_conn_src_settle(s, late);

		if (r != -EINPROGRESS)
			return r;
		pthread_mutex_unlock(&s->lock);
		(void)wait_fd(s, x, POLLOUT, late ? 1 : (int)((until - now + 999999) / 1000000),
			      false);
		san_sock_lock(s);
	}
}

/*
 * The call's upgrade left the connection on TCP, and a handler ran while it slept (san_sig.h):
 * the kernel's call, asleep all that time, would have ended. What TCP takes (or holds) now,
 * without waiting, or EINTR if nothing; SAN_PASS when no handler ran or it asks for restart
 * (the kernel's own call sleeps on). A reference on s is held.
 */
static ssize_t dropped_after_upgrade(struct san_sock *s, int fd, struct msghdr *m, int flags,
				     bool send, int *timeo, uint64_t *tend)
{
	long r;

	if (san_sig_take_noted(sock_timeo_left(s, send ? SO_SNDTIMEO : SO_RCVTIMEO, timeo, tend) >=
			       0) >= 0)
		return SAN_PASS;
	r = send ? san_sys_sendmsg(fd, m, flags | MSG_DONTWAIT) :
		   san_sys_recvmsg(fd, m, flags | MSG_DONTWAIT);
	return r == -EAGAIN ? -EINTR : r;
}

/*
 * A send that has moved bytes must not start another piece on a TCP socket the peer reset:
 * that piece, moving nothing, would take the error (the kernel reports a socket's error once)
 * and the application's next send say EPIPE. The kernel's own send returns the count there
 * and leaves ECONNRESET to the next call (a reader killed while its sender slept in a send
 * that outlasted the switch-over, no pause: t_edge_reader). A reset ends TCP (POLLHUP); an
 * error queue's entries alone (POLLERR: MSG_ZEROCOPY) do not stop the send.
 */
static bool tcp_send_ended(int fd)
{
	struct pollfd p = { fd, 0, 0 };

	return san_sys_poll(&p, 1, 0) > 0 && (p.revents & POLLHUP);
}

/*
 * A blocking send whose connection fell back to TCP after part of it went (an upgrade proposed
 * when that send would have waited: a_due): the kernel's would have gone on until every byte was
 * taken, and so does this, through the kernel. Returns the bytes sent in all (a signal or an
 * error ends it with what went, as the kernel's send returns its count).
 */
static size_t send_rest(int fd, const struct msghdr *m, size_t done, size_t total, int flags)
{
	while (done < total) {
		struct iovec sl[64];
		struct msghdr mh = *m;
		long r;

		if (tcp_send_ended(fd))
			break;
		mh.msg_iov = sl;
		mh.msg_iovlen = (size_t)iov_slice(m->msg_iov, (int)m->msg_iovlen, done, total - done,
						  sl, 64);
		r = san_sys_sendmsg(fd, &mh, flags | MSG_NOSIGNAL);
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	return done;
}

ssize_t san_sock_sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct san_sock *s;
	size_t total = 0, done = 0;
	bool nb, src_tried = false, upgraded = false;
	int timeo = -2, w;
	uint64_t tend = 0;
	ssize_t r;

	if (lite_io(fd, (struct msghdr *)m, flags, true, &r))
		return r;
	if ((r = sock_io_begin(fd, m, &s, &total)) != 1)
		return r;
	nb = fd_nonblocking(fd, flags);
	for (;;) {
		struct iovec sl[64];
		struct iovec *v = sl;
		int cnt = (int)m->msg_iovlen, need_wait = 0, waitfd;
		short waitev;

		san_sock_lock(s);
		upgraded |= sock_before_io(s, true, NULL);
		san_sock_flush_fin(s);
		if (s->dropped) {
			/* the upgrade left it on TCP: pass through from now on */
			pthread_mutex_unlock(&s->lock);
			if (upgraded && !nb) {
				/* (bytes moved: the kernel returns their count at any signal) */
				r = done ? (san_sig_take_noted(false) != 0 ? -EINTR : SAN_PASS)
					 : dropped_after_upgrade(s, fd, (struct msghdr *)m, flags,
								 true, &timeo, &tend);
				if (r != SAN_PASS) {
					san_sock_put(s);
					return done ? (ssize_t)done : r;
				}
			}
			san_sock_put(s);
			if (done && !nb && done < total)
				done = send_rest(fd, m, done, total, flags);
			if (done)
				return (ssize_t)done;
			return SAN_PASS;
		}
		if (!done && sock_direct_ok(s, true))
			return sock_direct(s, fd, (struct msghdr *)m, flags, true);
		/* no pause: our direction commits in the first send that may (§16) */
		if (s->prep == SK_PREP_READY && s->tx == SK_TX_TCP && !s->err)
			(void)sock_commit_tx(s, false);
		if (s->err) {
			r = done ? -EPIPE : san_sock_take_err(s, -EPIPE);
			pthread_mutex_unlock(&s->lock);
			break;
		}
		if (done) {
			if (cnt > 64)
				v = malloc(sizeof(*v) * (size_t)cnt);
			if (!v) {
				pthread_mutex_unlock(&s->lock);
				r = -ENOMEM;
				break;
			}
			cnt = iov_slice(m->msg_iov, (int)m->msg_iovlen, done, total - done, v, cnt);
		} else {
			v = m->msg_iov;
		}
		if (s->tx == SK_TX_TCP) {
			struct msghdr mh = *m;

			mh.msg_iov = v;
			mh.msg_iovlen = (size_t)cnt;
			/* MSG_NOSIGNAL: SIGPIPE is raised once, where the call ends (below) */
			b_send_begins(s);
			/* (the call ends with its count: done is not 0) */
			r = done && tcp_send_ended(s->tcp) ?
				    -EPIPE :
				    san_sys_sendmsg(s->tcp, &mh, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
			if (r > 0) {
				sock_tcp_moved(s, true, (uint64_t)r);
				a_sent(s);
			}
			if (r == -EAGAIN && sock_send_would_wait(s)) {
				need_wait = -1; /* proposed: look again (on the SAN now, perhaps) */
				upgraded = true;
			}
			waitfd = s->tcp;
			waitev = POLLOUT;
		} else {
			/* offers while the peer takes them: once it did not, the area takes the rest */
			r = san_conn_send(s, v, cnt, total - done, !nb && !src_tried);
			if (r > 0)
				san_sock_mark_flush(s);
			if (r == -EINPROGRESS) {
				bool moved;

				r = src_wait(s, v, cnt, total - done, &moved);
				src_tried = r == 0 || moved; /* the peer did not come: no new offer */
				if (r > 0)
					san_sock_mark_flush(s);
				if (src_tried && san_fault(SAN_FAULT_SRC_LATE)) {
					/* a sender descheduled right after giving its offer up */
					pthread_mutex_unlock(&s->lock);
					usleep(100000);
					san_sock_lock(s);
				}
				need_wait = -1; /* the rest (or all, not taken) at once */
			} else if (r == -EAGAIN && s->src_out) {
				/*
				 * Another thread's send is being read: wait until it is settled.
				 * X stays plugged until then, so a nonblocking caller's poll agrees.
				 */
				if (!nb)
					san_sock_wait(s, NULL);
				need_wait = nb ? -2 : -1;
			}
			if (r == -ECONNRESET && s->err && !done)
				(void)san_sock_take_err(s, 0); /* this call reports it (else the next) */
			waitfd = s->xfd;
			waitev = POLLOUT;
			/*
			 * A nonblocking send that took only part: the application (nginx does) may
			 * take that as "full" and wait for an EPOLLOUT edge, as TCP gives when room
			 * comes. Plug X now, so that the room, when it comes, is an edge.
			 */
			if (r > 0 && nb && (size_t)r < total - done && s->swapped)
				(void)san_conn_tx_arm(s, 0);
			if (r == -EAGAIN && !s->swapped && !s->anchor_dead &&
			    (san_sock_check_anchor(s), s->anchor_dead))
				/*
				 * Full, and the peer's process is gone (its reader will never
				 * free room): the send answers as TCP's to a closed peer.
				 */
				need_wait = -1;
			else if (r == -EAGAIN && need_wait < 0)
				; /* settled meanwhile (retry), or nonblocking behind an offer (EAGAIN) */
			else if (r == -EAGAIN && san_conn_tx_arm(s, 0) == 1)
				need_wait = -1; /* space now: retry at once */
			else if (r == -EAGAIN && nb && !s->swapped) {
				/*
				 * The application waits on the TCP fd, which stays writable: it
				 * would get no new edge, and a level-triggered wait would spin.
				 * Its waits take POLLOUT from X until the peer frees room; then the
				 * engine re-arms its epoll registrations (san_up_watch_tx). Without
				 * any, poll/select wait on X itself and the next send that moves
				 * bytes unmutes: no engine round trip per full ring.
				 */
				if (s->proc->nep)
					san_up_watch_tx(s);
				san_sock_tx_mute(s);
			} else if (r > 0 && s->proc->tx_mute && !s->proc->fw) {
				san_sock_tx_unmute(s, true); /* room came: the TCP number's own POLLOUT */
			}
		}
		pthread_mutex_unlock(&s->lock);
		if (v != sl && v != m->msg_iov)
			free(v);
		if (r > 0)
			done += (size_t)r;
		if (r >= 0 && (done == total || nb))
			break;
		if (r < 0 && r != -EAGAIN)
			break;
		if (r == -EAGAIN && nb && need_wait != -1)
			break;
		if (need_wait == -1)
			continue;
		w = wait_fd(s, waitfd, waitev, sock_timeo_left(s, SO_SNDTIMEO, &timeo, &tend),
			    upgraded);
		upgraded = false;
		if (w == WAIT_RESTART && (done || call_moved))
			w = -EINTR; /* (done: the call returns the count) */
		if (w <= 0) {
			/*
			 * Timed out: EAGAIN; a signal: EINTR; either way what went is returned.
			 * X stays plugged: the ring is still full for every other send and poll.
			 */
			r = w < 0 ? -EINTR : -EAGAIN;
			break;
		}
		if (s->tx == SK_TX_SAN)
			san_conn_tx_disarm(s);
	}
	if (done && r == -ENOBUFS && s->tx == SK_TX_SAN) {
		/*
		 * Part went (a direct write), the rest found no memory: the call returns short,
		 * which an application waiting with EPOLLET takes for "full, wait for EPOLLOUT"
		 * (TCP gives that edge when room comes). Room is there, memory may come: plug and
		 * re-check, so that X gives the edge now (or when the ring has room, if it is full).
		 */
		san_sock_lock(s);
		if (s->txr.sh && !s->err)
			(void)san_conn_tx_arm(s, 0);
		pthread_mutex_unlock(&s->lock);
	}
	san_sock_put(s);
	if (done)
		return (ssize_t)done;
	/* counted where the application sees it (after a direct write it sees a short send) */
	if (r == -ENOBUFS && san_stats_enabled())
		san_stats_add(SAN_STAT_ENOBUFS, 1);
	if (r == -EPIPE)
		san_core_exec_wait(); /* (another thread's exec ended it: the image goes first) */
	if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	return r;
}

/* ---- receive --------------------------------------------------------------------------- */

/*
 * A MSG_WAITALL receive whose connection was left on TCP part-way: the rest straight from the
 * kernel, as if the call had passed through from the start. The bytes it got (0 on an error:
 * the caller returns what it has, as the kernel does after a partial WAITALL).
 */
static size_t recv_rest(int fd, struct msghdr *m, size_t done, size_t total, int flags)
{
	struct iovec sl[64];
	struct iovec *v = sl;
	struct msghdr mh = *m;
	int cnt = (int)m->msg_iovlen;
	ssize_t r;

	if (cnt > 64 && !(v = malloc(sizeof(*v) * (size_t)cnt)))
		return 0;
	mh.msg_iov = v;
	mh.msg_iovlen = (size_t)iov_slice(m->msg_iov, cnt, done, total - done, v, cnt > 64 ? cnt : 64);
	r = san_sys_recvmsg(fd, &mh, flags);
	if (v != sl)
		free(v);
	return r > 0 ? (size_t)r : 0;
}

ssize_t san_sock_recvmsg(int fd, struct msghdr *m, int flags)
{
	struct san_sock *s;
	size_t total = 0, done = 0;
	bool nb, waitall, upgraded = false;
	int timeo = -2, paused_waits = 0, w, oflags;
	uint64_t tend = 0;
	ssize_t r;
	bool topping_up = false;

	if (lite_io(fd, m, flags, false, &r))
		return r;
	if ((r = sock_io_begin(fd, m, &s, &total)) != 1)
		return r;
	r = 0;
	oflags = flags;
	nb = fd_nonblocking(fd, flags);
	waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK) && !nb;
	flags &= ~MSG_WAITALL;
	for (;;) {
		struct iovec sl[64];
		struct iovec *v = sl;
		int cnt = (int)m->msg_iovlen, waitfd = -1;
		bool pause_wait = false, claimed = false, at_mark = false, rx_empty = false;

		san_sock_lock(s);
		if (sock_before_io(s, false, &rx_empty))
			upgraded = true;
		san_sock_flush_fin(s);
		if (rx_empty && !done && !nb &&
		    san_sig_take_noted(sock_timeo_left(s, SO_RCVTIMEO, &timeo, &tend) >= 0) < 0) {
			/*
			 * Nothing had come when the call began, and a handler ran while the
			 * upgrade slept: the kernel's receive was asleep then, and ended. (Bytes
			 * that came meanwhile are the next call's.)
			 */
			pthread_mutex_unlock(&s->lock);
			san_sock_put(s);
			return -EINTR;
		}
		if (s->dropped) {
			pthread_mutex_unlock(&s->lock);
			if (upgraded && !done && !nb &&
			    (r = dropped_after_upgrade(s, fd, m, oflags, false, &timeo, &tend)) !=
				    SAN_PASS) {
				san_sock_put(s);
				return r;
			}
			san_sock_put(s);
			if (done && waitall && done < total)
				done += recv_rest(fd, m, done, total, flags | MSG_WAITALL);
			return done ? (ssize_t)done : SAN_PASS;
		}
		if (!done && sock_direct_ok(s, false))
			return sock_direct(s, fd, m, oflags, false);
		if (cnt > 64)
			v = malloc(sizeof(*v) * (size_t)cnt);
		if (!v) {
			pthread_mutex_unlock(&s->lock);
			r = -ENOMEM;
			break;
		}
		switch (s->rx) {
		case SK_RX_PAUSED:
			pause_wait = true;
			r = -EAGAIN;
			/*
			 * A nonblocking reader's third look returns (below): bytes may sit in TCP
			 * meanwhile, whose edge the application took, and the pause's end owes it
			 * one (san_sock_epoll_rearm_paused). Said under the lock that saw the pause:
			 * an end between this look and a later lock would find no word of it.
			 */
			if (nb && paused_waits >= 2)
				s->rx_told_paused = true;
			break;
		case SK_RX_TCP:
		case SK_RX_DRAIN: {
			size_t max = total - done;
			struct msghdr mh = *m;
			int looking = 0;

			if (s->err) {
				/* committed, then reset before the swap: as TCP after an RST */
				r = san_sock_take_err(s, 0);
				break;
			}
			if (s->rx == SK_RX_TCP && s->prep && (looking = sock_look(s)) < 0) {
				r = san_sock_take_err(s, 0);
				break;
			}
			if (s->rx == SK_RX_DRAIN && s->tcp_rx == s->x_peer) {
				r = sock_read_mark(s);
				if (r == 0)
					goto san;
				if (r == -EINPROGRESS) {
					/* B, at A's MARK before its engine took A's SWITCH */
					pause_wait = true;
					r = -EAGAIN;
					if (nb && paused_waits >= 2)
						s->rx_told_paused = true;
					break;
				}
				if (r == -ESHUTDOWN)
					r = 0; /* end of file */
				waitfd = s->tcp;
				break;
			}
			if (s->rx == SK_RX_DRAIN && max > s->x_peer - s->tcp_rx)
				max = s->x_peer - s->tcp_rx;
			cnt = iov_slice(m->msg_iov, (int)m->msg_iovlen, done, max, v,
					cnt > 64 ? cnt : 64);
			mh.msg_iov = v;
			mh.msg_iovlen = (size_t)cnt;
			r = san_sys_io(s->tcp, &mh, flags | MSG_DONTWAIT, false);
			if (looking)
				sock_look_end(s);
			if (r > 0 && !(flags & MSG_PEEK))
				sock_tcp_moved(s, false, (uint64_t)r);
			/*
			 * B: data from A with no PROPOSE handled, past the point where a switch
			 * at the other end would have proposed (before its first byte with
			 * SANSWITCH_SWITCH_AFTER 0, else before the send that begins its exchange
			 * switch_after + 1, and again at each of its next SAN_A_TRIES - 1
			 * exchanges if refused): this peer never will. Close
			 * the window now rather than after SAN_B_WINDOW_MS of the slower,
			 * counted path. (Not on bytes: A's due point by bytes comes only at its
			 * next call, and one blocking send may carry megabytes.) B's exchanges
			 * are those A has counted too (b_send_begins); one more than A's last try, for
			 * bytes A sent before ours reached it that its kernel held back while
			 * our receive queue was full (they come after our socket looked empty).
			 */
			if (r > 0 && s->role == SAN_UP_ROLE_B && !s->attempted && s->rx == SK_RX_TCP) {
				if (s->ex_sent) {
					s->ex_done++;
					s->ex_sent = false;
				}
				if ((!san_cfg.switch_after && !san_cfg.nopause) ||
				    (s->ex_done > san_cfg.switch_after + SAN_A_TRIES +
							  (san_cfg.nopause ? SAN_NOPAUSE_LATE : 0) &&
				     b_late_enough(s))) {
					m->msg_flags = mh.msg_flags;
					san_sock_drop(s, SAN_FB_NOT_ATTEMPTED);
					waitfd = s->tcp; /* a MSG_WAITALL rest: the next round passes through */
					break;
				}
			}
			if (r == 0 && s->rx == SK_RX_DRAIN && max) {
				san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
				r = -ECONNRESET;
			}
			at_mark = r > 0 && s->rx == SK_RX_DRAIN && s->tcp_rx == s->x_peer;
			m->msg_flags = mh.msg_flags;
			waitfd = s->tcp;
			break;
		}
		case SK_RX_SAN:
		san:
			/* An offer made before the wait: taken back, or claimed (its answer is next). */
			claimed = !san_conn_direct_settle(s);
			if (s->rd_shut && !claimed) {
				r = 0; /* read side shut down: end of file, as TCP */
				break;
			}
			cnt = iov_slice(m->msg_iov, (int)m->msg_iovlen, done, total - done, v,
					cnt > 64 ? cnt : 64);
			r = san_conn_recv(s, v, cnt, flags);
			if (r == -EBUSY) {
				/* the next frame answers another receive's offer: let it take it */
				pause_wait = true;
				r = -EAGAIN;
				break;
			}
			if (r <= 0 && r != -EAGAIN && s->direct_out)
				/* leaving with an error or EOF: no write may land after we return */
				san_conn_direct_drop(s);
			/*
			 * X must read as ready only while the ring holds something (TCP's rule:
			 * readable means a read will not block): emptied, take the doorbells off.
			 * A short read must also re-arm when the ring is not empty: the frame that
			 * came after the read looked was committed unannounced (we were not
			 * armed), and an edge-triggered waiter, told by the short read that it
			 * drained the socket, waits for a new edge (TCP gives one per arrival).
			 * rx_arm rings X itself when it finds frames: that is the edge.
			 * A connection the waits watch in its ring (core/san_rxwatch.h) is left
			 * with its flag down, quiet (san_rxwatch_defer; taken down if this
			 * thread's own wait had put it up): armed now, its peer would ring for the
			 * next request, which our next wait's spin is about to see.
			 */
			/*
			 * (An edge-triggered registration its waits watch: the short read told
			 * the application that it drained the ring; what the ring still holds is
			 * news to it, which the next watch, or X rung by the arm, reports.)
			 */
			if (r > 0 && !(flags & MSG_PEEK) && (size_t)r < total - done && s->et_watch)
				s->edge_seen = UINT64_MAX;
			if (r > 0 && !(flags & MSG_PEEK) &&
			    ((size_t)r < total - done || !san_conn_rx_ready(s)) && !san_rxwatch_defer(s)) {
				if (s->prov && s->prov->wire == SAN_PROV_SHM)
					san_stats_add(SAN_STAT_SHM_READ_ARMS, 1);
				(void)san_conn_rx_rearm(s);
			}
			/*
			 * Empty: whoever waits next (we, or the application in poll/epoll) sleeps
			 * on X, so the peer must ring it: arm. Data that came meanwhile: again.
			 * Nonblocking, of a connection an epoll_wait of ours watched: quiet instead
			 * (san_rxwatch_defer_empty), for that wait's spin to find the next frame.
			 */
			if (r == -EAGAIN && ((!nb && (spin_for(s) || san_conn_rx_arm_mine(s) == 1)) ||
					     (nb && !san_rxwatch_defer_empty(s) && empty_arm(s) == 1)))
				r = -EINTR;
			else if (r == -EAGAIN && !nb && !claimed && !done && !(flags & MSG_PEEK))
				/* about to sleep: the peer may write straight into the buffer */
				san_conn_direct_offer(s, v, cnt);
			waitfd = s->xfd;
			m->msg_flags = 0;
			break;
		}
		pthread_mutex_unlock(&s->lock);
		if (v != sl)
			free(v);
		if (r > 0)
			done += (size_t)r;
		if (topping_up && r < 0)
			break; /* nothing more at once: the bytes so far (a later error comes next) */
		/*
		 * The read stopped at the peer's switch-over offset with room left in the buffer:
		 * the MARK, and bytes in the ring behind it, may be there already, and TCP would
		 * have returned them in this call. A reader that takes a short read for a drained
		 * socket (nginx with EPOLLRDHUP, edge-triggered) would otherwise wait for an edge
		 * that never comes: the MARK is queued on TCP already and the rest goes by the
		 * ring. So look once more, without waiting (a nonblocking round: no spin, no
		 * offer, and EAGAIN returns the count).
		 */
		if (at_mark && !waitall && done < total && !(flags & MSG_PEEK)) {
			topping_up = true;
			nb = true;
			continue;
		}
		if (r == 0 || (r > 0 && (!waitall || done == total)))
			break;
		if (r < 0 && r != -EAGAIN && r != -EINTR)
			break;
		if (r == -EINTR)
			continue;
		if (pause_wait && nb && ++paused_waits > 2)
			break; /* EAGAIN: a stalled peer must not block a nonblocking reader */
		if (pause_wait) {
			/* The engine ends the pause within a side-channel round trip. */
			san_sock_lock(s);
			if (s->rx == SK_RX_PAUSED || (s->direct_claimed && s->rx == SK_RX_SAN) ||
			    (s->prep == SK_PREP_LOOKING && s->rx == SK_RX_DRAIN && !s->err))
				san_sock_wait_ms(s, 5);
			pthread_mutex_unlock(&s->lock);
			continue;
		}
		if (nb)
			break;
		w = wait_fd(s, waitfd, POLLIN,
			    claimed ? -1 : sock_timeo_left(s, SO_RCVTIMEO, &timeo, &tend), upgraded);
		upgraded = false;
		if (w == WAIT_RESTART && done)
			w = -EINTR; /* a MSG_WAITALL receive with bytes: the count */
		if (w <= 0) {
			bool settled;

			/*
			 * Timed out, or a signal: an offer the peer claimed keeps us until its
			 * answer (its bytes are ours then: the call returns them).
			 */
			san_sock_lock(s);
			settled = san_conn_direct_settle(s);
			pthread_mutex_unlock(&s->lock);
			if (!settled)
				continue;
			r = w < 0 ? -EINTR : -EAGAIN;
			break;
		}
	}
	san_sock_put(s);
	if (done)
		return (ssize_t)done;
	return r;
}

/* ---- control ---------------------------------------------------------------------------- */

/*
 * DISCONNECT after everything sent so far. With the ring full it waits, the call does not:
 * shutdown() and close() never fail for lack of buffer (TCP queues its FIN too). The pending
 * DISCONNECT goes out from the next data call, or from the engine once the peer frees room.
 * Lock held.
 */
void san_sock_send_fin(struct san_sock *s)
{
	s->fin_sent = true;
	s->fin_pending = true;
	san_sock_flush_fin(s);
	if (s->fin_pending && san_conn_tx_arm(s, SAN_HDR_LEN) == 1)
		san_sock_flush_fin(s);
	if (s->fin_pending)
		san_up_watch_tx(s);
}

/* Try the pending DISCONNECT again. Lock held. */
void san_sock_flush_fin(struct san_sock *s)
{
	int r;

	if (!s->fin_pending || s->err)
		return;
	r = san_conn_post_ctrl(s, SAN_T_DISCONNECT, 0);
	if (r != -EAGAIN)
		s->fin_pending = false;
	if (r == 0) {
		san_sock_fin_sent(s);
		san_sock_mark_flush(s);
	}
}

void san_sock_mark_flush(struct san_sock *s)
{
	int r;

	if (!s->mark_due || s->proc->mw || s->err)
		return;
	if (s->prov && s->prov->mark_after) {
		s->prov->mark_after(s);
		return;
	}
	if (s->tcp < 0)
		return;
	r = san_up_write_mark(s, s->tcp);
	if (r == -EAGAIN) {
		/* behind bytes of ours on TCP the peer has not read yet: the engine finishes it */
		san_up_watch_mark(s);
		return;
	}
	s->mark_due = false;
	if (r < 0)
		san_sock_reset_locked(s, -ECONNRESET, SAN_R_TCP);
}

int san_sock_shutdown(int fd, int how)
{
	struct san_sock *s = san_sock_get(fd);
	int r = 0;

	if (!s)
		return SAN_PASS;
	san_sock_lock(s);
	if (how != SHUT_RD && a_due_at_shutdown(s)) {
		s->last_try = true;
		a_propose_now(s, san_prov_for_a(NULL));
		/*
		 * Without a pause the handshake goes on on the engine: the end must follow it (a
		 * MARK after our FIN could not be), so this once the call waits for it.
		 */
	}
	if (how != SHUT_RD && san_cfg.nopause && s->attempted && !s->committed && !s->dropped &&
	    !s->err && s->prov == &san_prov_shm &&
	    (s->role == SAN_UP_ROLE_A || (s->peer_caps & SAN_CAP_NOPAUSE))) {
		/* (a B that answered a paused proposal, an older client's, never becomes READY) */
		/*
		 * Without a pause the handshake may still go on on the engines: the end must follow
		 * it, by the ring (a MARK after our FIN could not be), so this once the call waits
		 * for it, and commits our way if the engine could not.
		 */
		san_up_wait_prepared(s);
		/*
		 * (-EBUSY: the peer's reader inside a receive each time we looked, or our counts
		 * not the kernel's yet: a full-duplex stream in flow. This is the commit's last
		 * chance, so it looks again for a while, a millisecond apart: a reader whose
		 * thread lost its CPU inside its receive keeps it for a time slice. 3 tries at once
		 * left an asyncio client's write_eof() on TCP in 1 connection of 8, 1 run in 5 of
		 * t_switch_nopause's full-duplex cases.)
		 */
		for (uint64_t end = now_ns() + SAN_SW_SHUT_NS;
		     s->prep == SK_PREP_READY && s->tx == SK_TX_TCP && !s->err && !s->dropped &&
		     !s->proc->closing;) {
			if (sock_commit_tx(s, false) != -EBUSY || now_ns() >= end)
				break;
			san_sock_wait_ms(s, 1); /* (the lock let go meanwhile; another thread may close) */
		}
	}
	if (s->prep && !s->committed && how != SHUT_RD) {
		/*
		 * Prepared without a pause, our way still on TCP: our end goes there, and we never
		 * commit after it (a MARK after a FIN). The peer may have committed its way: then
		 * we read to its X and its MARK, and the ring (sock_read_mark), not a reset.
		 */
		uint64_t x;

		s->fin_sent = true;
		if (s->rx == SK_RX_TCP && sock_withdraw(s, &x, "our FIN") == 1)
			(void)sock_take_x(s, x);
	}
	if (!s->swapped && !s->committed) {
		/* Not switched: shutting down ends the window; the kernel does the rest. */
		if (!s->attempted || s->rx == SK_RX_TCP)
			san_sock_drop(s, s->attempted ? SAN_R_STATE : SAN_FB_NOT_ATTEMPTED);
		r = SAN_PASS;
	} else {
		/* Committed: the sends go to the SAN, and so does the end of the stream. */
		if (how != SHUT_RD && !s->fin_sent && !s->err && s->tx == SK_TX_SAN && s->src_out)
			/*
			 * Another thread's send offered its buffer, and the peer was woken for
			 * those bytes: they go before the end (moved into the ring, or read by a
			 * claim we wait for), and that send returns the count, short, as TCP's
			 * would before the shutdown. A DISCONNECT now would stand at the offer's
			 * position: the offer could no longer be claimed and the move would be
			 * refused, so the bytes would vanish from the peer's view.
			 */
			san_conn_src_drop(s); /* (may drop the lock a while: look again) */
		if (how != SHUT_RD && !s->fin_sent && !s->err && s->tx == SK_TX_SAN)
			san_sock_send_fin(s);
		/* The anchor must stay readable (it reports the peer's end): only remember it. */
		if ((how == SHUT_RD || how == SHUT_RDWR) && !s->rd_shut) {
			s->rd_shut = true;
			/* X reads as TCP does after SHUT_RD: POLLIN | POLLRDHUP from now on. */
			if (s->xfd >= 0)
				(void)san_sys_shutdown(s->xfd, SHUT_RD);
			/* No more offers; one claimed stays its receive's to wait for. */
			s->direct_off = true;
			(void)san_conn_direct_settle(s);
		}
	}
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return r;
}

/* The sock of fd, locked and referenced, if fd is the notification socket; else NULL. */
static struct san_sock *get_swapped_locked(int fd)
{
	struct san_sock *s = san_sock_get(fd);

	if (!s)
		return NULL;
	san_sock_lock(s);
	if (!s->swapped) {
		pthread_mutex_unlock(&s->lock);
		san_sock_put(s);
		return NULL;
	}
	return s;
}

static void put_unlock(struct san_sock *s)
{
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
}

int san_sock_fionread(int fd, int *n)
{
	struct san_sock *s = get_swapped_locked(fd);

	if (!s)
		return SAN_PASS;
	*n = (int)san_conn_rx_bytes(s);
	put_unlock(s);
	return 0;
}

int san_sock_take_err(struct san_sock *s, int eof_or_epipe)
{
	if (s->err_told)
		return eof_or_epipe;
	s->err_told = true;
	if (s->swapped && s->xfd >= 0) {
		/*
		 * TCP's POLLERR ends once its error is taken; X's (its partner released with
		 * messages unread) likewise, read off the same way.
		 */
		int e;
		socklen_t l = sizeof(e);

		(void)SAN_SYS(SYS_getsockopt, (long)s->xfd, (long)SOL_SOCKET, (long)SO_ERROR, &e, &l);
	}
	return s->err;
}

int san_sock_so_error(int fd, int *err)
{
	struct san_sock *s = get_swapped_locked(fd);

	if (!s)
		return SAN_PASS;
	*err = s->err ? -san_sock_take_err(s, 0) : 0;
	put_unlock(s);
	return 0;
}

int san_sock_anchor(int fd)
{
	struct san_sock *s = san_sock_get(fd);
	int a;

	if (!s)
		return -EBADF;
	a = s->swapped ? s->tcp : fd;
	san_sock_put(s);
	return a;
}

/*
 * epoll_ctl() on a candidate, made under the sock's lock so that it cannot fall between the
 * swap's DEL and ADD (a registration made there would stay on the TCP file, which never
 * becomes readable again). Registrations are recorded for the swap to move.
 */
/*
 * epoll_ctl() of a lite candidate: made, and kept in its record (the swap re-creates the
 * registrations: lite_make_sock), inside its gate so that no sock is made meanwhile. One more
 * than it keeps is not done here (nor, after a bounded wait, one while another thread's keeps
 * the record's lock). True with *out the result.
 */
static bool lite_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev, int *out)
{
	struct san_lite *l;
	uint32_t gen, i;
	bool done = false, locked;

	if (!san_lite_of(fd) || !(l = lite_enter(fd, &gen)))
		return false;
	/*
	 * Another thread's epoll_ctl holds the lock for one system call, inside the gate: wait for
	 * it (bounded: a signal handler's call on this thread must not spin for ever). Giving up
	 * at once left the connection on TCP, since the holder is inside the gate and
	 * lite_promote then drops it.
	 */
	for (int spin = 0; !(locked = !__atomic_exchange_n(&l->ep_lock, 1, __ATOMIC_ACQUIRE)) &&
			   spin < 1000;
	     spin++)
		sched_yield();
	if (locked) {
		for (i = 0; i < l->nep && l->ep[i].epfd != epfd; i++)
			;
		if (op == EPOLL_CTL_DEL || (ev && (i < l->nep || i < SAN_LITE_EPOLL_MAX))) {
			done = true;
			*out = san_sys_epoll_ctl(epfd, op, fd, ev);
			if (*out == 0 && op == EPOLL_CTL_DEL && i < l->nep)
				l->ep[i] = l->ep[--l->nep];
			else if (*out == 0 && op != EPOLL_CTL_DEL) {
				l->ep[i].epfd = epfd;
				l->ep[i].ev = *ev;
				if (i == l->nep)
					l->nep++;
			}
		}
		__atomic_store_n(&l->ep_lock, 0, __ATOMIC_RELEASE);
	}
	san_lite_leave(l, gen);
	return done;
}

int san_sock_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct san_sock *s;
	struct epoll_event kev;
	bool muted = false;
	int r, i;

	if (lite_epoll_ctl(epfd, op, fd, ev, &r))
		return r;
	if (!(s = san_sock_get(fd)))
		return SAN_PASS;
	san_sock_lock(s);
	if (op != EPOLL_CTL_DEL)
		sock_touch(s);
	if (s->proc->tx_mute && op != EPOLL_CTL_DEL && ev && tx_mutable(ev) && !s->swapped) {
		/* the ring is full: no EPOLLOUT until room comes (san_sock_tx_mute), which the
		 * engine watches for (it did not while only poll/select waited) */
		kev = *ev;
		kev.events &= ~(uint32_t)EPOLLOUT;
		muted = true;
		san_up_watch_tx(s);
	}
	r = san_sys_epoll_ctl(epfd, op, fd, muted ? &kev : ev);
	if (r == 0 && op != EPOLL_CTL_DEL && ev && (ev->events & EPOLLET) && !s->want_edges) {
		/*
		 * TCP wakes an edge-triggered waiter at every arrival, even with data unread;
		 * our X gets a doorbell only when the reader sleeps, unless it asks for more.
		 * Never turned off again: a stray doorbell costs a system call, a missing edge
		 * a hang.
		 */
		s->want_edges = true;
		if (s->rxr.sh)
			san_shm_ring_cons_edges(&s->rxr, true);
	}
	if (r == 0 && !s->swapped) {
		for (i = 0; i < s->proc->nep && (s->proc->ep[i].epfd != epfd || s->proc->ep[i].fd != fd); i++)
			;
		if (op == EPOLL_CTL_DEL) {
			if (i < s->proc->nep)
				s->proc->ep[i] = s->proc->ep[--s->proc->nep];
		} else if (ev) {
			if (i == s->proc->nep && s->proc->nep < SAN_SOCK_EPOLL_MAX)
				s->proc->nep++;
			if (i < s->proc->nep) {
				s->proc->ep[i].epfd = epfd;
				s->proc->ep[i].fd = fd;
				s->proc->ep[i].ev = *ev;
			} else {
				s->ep_overflow = true;
			}
			if (s->committed || s->prep == SK_PREP_READY)
				san_up_watch_rx_edges(s);
		}
	}
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return r;
}

/*
 * dup() of a managed fd: one more number names the connection. Switched, both are X;
 * committed, the swap makes every registered number X (san_sock_swap); a candidate switches
 * with all its numbers (perl's open($out, ">&", $s), a dup2() onto 0 and 1 before an exec).
 * Until the swap, the calls made through any number reach the TCP socket through the number
 * the connection goes by (s->tcp, moved under the lock when the application closes it:
 * san_sock_on_close), or through their own (sock_direct). A number we cannot follow is plain
 * TCP at once, and the connection never switches (it is counted through fd). Not in a vfork
 * child: its numbers are its own, the memory the parent's.
 */
void san_sock_on_dup(int fd, int nfd)
{
	struct san_sock *s;
	bool named = false;

	if (!san_fdtable_owned() || !(s = san_sock_get(fd)))
		return;
	san_sock_lock(s);
	if (!s->committed && (s->dropped || s->proc->closing)) {
		/* a candidate left TCP, or ending, since the wrapper looked: the copy passes through
		 * (a switched one's copies, a fork child's orphan's too, stay its: exec ends them) */
		san_sock_drop_fd(nfd, s->role == SAN_UP_ROLE_A, 0);
		pthread_mutex_unlock(&s->lock);
		san_sock_put(s);
		return;
	}
	pthread_mutex_lock(&reg_lock);
	if (reg && (unsigned int)nfd < reg_size && !reg[nfd]) {
		reg[nfd] = s;
		s->proc->refs++;
		s->proc->fdrefs++;
		s->et_never = true; /* (san_rxwatch.c: registrations through either number) */
		named = true;
	}
	pthread_mutex_unlock(&reg_lock);
	if (named && !s->swapped)
		sock_flags_all(s, SAN_FDF_DUP | (s->proc->tx_mute ? SAN_FDF_TXMUTE : 0), 0);
	if (!named && !s->committed) {
		s->ep_overflow = true;
		san_sock_drop_fd(nfd, s->role == SAN_UP_ROLE_A, 0);
	}
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
}

/* Do a and b name one connection (dup2(a, b) between two of its numbers changes nothing)? */
bool san_sock_same(int a, int b)
{
	bool r;

	pthread_mutex_lock(&reg_lock);
	r = reg && (unsigned int)a < reg_size && (unsigned int)b < reg_size && reg[a] &&
	    reg[a] == reg[b];
	pthread_mutex_unlock(&reg_lock);
	return r;
}

bool san_sock_known(int fd)
{
	struct san_sock *s;

	if (san_lite_of(fd))
		return true; /* (asked, not needed: no sock made for it) */
	s = san_sock_get(fd);

	san_sock_put(s);
	return s != NULL;
}

int san_sock_passthrough(int fd)
{
	struct san_sock *s;
	int r = 0;

	if (san_lite_of(fd)) {
		bool a = san_lite_is_a(fd);
		uint32_t gen;

		/* (no sock to make first; one made meanwhile is dropped below) */
		if (san_lite_shut(fd, &gen)) {
			san_sock_drop_fd(fd, a, SAN_R_STATE);
			return 0;
		}
	}
	s = san_sock_get(fd);

	if (!s)
		return 0;
	san_sock_lock(s);
	if (s->committed || s->swapped)
		r = -EINVAL;
	else if (!s->dropped)
		san_sock_drop(s, SAN_R_STATE);
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return r;
}

/*
 * The kernel's counts of the stream less ours, each way (san_forked_kernel_counts): what the
 * prepare handler keeps and the switch compares. Only while no call of ours is in the kernel,
 * whose bytes the kernel would count and we not yet. Lock held; false: cannot be taken now.
 */
static bool sock_kernel_diff(struct san_sock *s, int64_t *dtx, int64_t *drx)
{
	uint64_t ktx, krx;

	if (san_fault(SAN_FAULT_COUNTS_BUSY) && !s->counts_fault_done) {
		s->counts_fault_done = true;
		return false;
	}
	if (s->in_kernel || san_forked_kernel_counts(s->tcp, &ktx, &krx))
		return false;
	*dtx = (int64_t)(ktx - s->tcp_tx);
	*drx = (int64_t)(krx - s->tcp_rx);
	return true;
}

/*
 * What the fork under way does with each sock of the registry (san_sock_atfork_prepare, in the
 * forking thread; the child inherits the list). Socks live in shared slots (san_slab.h), so the
 * child cannot read a slot it does not share: the parent may free or reuse it the moment the fork
 * returns. So the child's copies are taken here, before the fork, each under its lock, and the
 * child finds its socks through this list, never through the slots.
 */
struct fork_rec {
	struct san_sock *s;	    /* the parent's sock (sorted by it: the child looks it up) */
	struct san_sock_proc *proc; /* its private part (the child's own copy after the fork) */
	struct san_sock *snap;	    /* the child's copy of it; NULL: shared, or none (below) */
	struct san_sock *mine;	    /* the child's sock: s shared, its copy, or NULL */
	bool shared;		    /* a switched shm connection the fork shares (holders raised) */
	bool in_reg;		    /* a number names it when the fork comes (reg_lock held) */
	bool unshare;		    /* raised, then closed before the fork: the parent lowers */
	bool ref;		    /* a reference taken here (let go after the fork) */
	bool active;		    /* role A (for a number dropped in the child) */
};
static struct fork_rec *fork_recs;
static size_t fork_nrecs, fork_cap;

static int fork_rec_cmp(const void *a, const void *b)
{
	const struct fork_rec *x = a, *y = b;

	return x->s < y->s ? -1 : x->s > y->s;
}

static struct fork_rec *fork_rec_find(struct san_sock *s)
{
	struct fork_rec key = { .s = s };

	return fork_recs ? bsearch(&key, fork_recs, fork_nrecs, sizeof(key), fork_rec_cmp) : NULL;
}

/*
 * Can the fork share s (docs/engine.md §7.1): switched both ways, its MARK out, on a provider
 * whose connections outlive a fork in both processes (shm). Lock held.
 */
static bool fork_shareable(struct san_sock *s)
{
	return s->committed && s->swapped && s->rx == SK_RX_SAN && s->tx == SK_TX_SAN &&
	       s->prov && s->prov->shared_by_fork && !s->mark_due && !s->proc->mw &&
	       !s->proc->orphan && !s->proc->closing && !s->proc->let_go;
}

/*
 * For one sock, lock held: a candidate's kernel counts (below); a switched shm connection is
 * shared, one more holder counted now (so that neither process's close can say DISCONNECT
 * while the other still holds it, even one that comes before the child runs); anything else
 * gets the child's copy, taken now.
 */
static void fork_prepare_one(struct fork_rec *r, bool cand)
{
	struct san_sock *s = r->s;

	san_rxwatch_unquiet(s);
	san_conn_cork_flush(s); /* (the child's cork tick knows nothing of the parent's holds) */
	if (s->prep && !s->committed && s->rx == SK_RX_TCP) {
		uint64_t x;

		/*
		 * Prepared without a pause, nothing committed: either process might read the TCP
		 * socket without looking at the peer's word. It stays TCP (the rings go with the
		 * sock); a peer that committed already is read to its X and MARK here.
		 */
		if (!(sock_withdraw(s, &x, "a fork") == 1 && sock_take_x(s, x))) {
			san_sock_prep_end(s);
			s->prep_gone = true; /* (no drop here: reg_lock is held) */
		}
	}
	if (cand)
		s->fork_base_ok = !s->dropped && !s->attempted && s->rx == SK_RX_TCP &&
				  s->tx == SK_TX_TCP &&
				  sock_kernel_diff(s, &s->fork_dtx, &s->fork_drx);
	if (fork_shareable(s)) {
		r->shared = true;
		if (!__atomic_exchange_n(&any_shared, true, __ATOMIC_ACQ_REL))
			(void)atexit(san_sock_exit_let_go); /* (inherited by the child) */
		__atomic_add_fetch(&s->holders, 1, __ATOMIC_ACQ_REL);
		/*
		 * (raised under the lock: no offer of a buffer is made from now on while both hold
		 * it, san_conn.c offers_ours; one already out is a thread's of this process)
		 */
		__atomic_add_fetch(&s->users, 1, __ATOMIC_ACQ_REL);
	} else if ((r->snap = malloc(sizeof(*r->snap)))) {
		memcpy(r->snap, s, sizeof(*s));
	}
}

/*
 * fork() copies every connection not switched yet, and either process may go on with it: a
 * server that accepts and forks a child to serve (the parent closes its copy), a client that
 * connects and lets a child talk, a program that forks a helper (the helper never touches it).
 * Each copy stays a candidate, marked forked: it switches in the one process that holds it
 * when the time comes, and only if the bytes it counted are where the kernel's stream is
 * (san_sock_counts_ok). So the kernel's counts are taken here, at the first fork, while ours
 * are exact: a send or receive of another thread in the kernel now (in_kernel) would make them
 * disagree, and such a candidate stays TCP. At a later fork the first counts stay: taken again,
 * they would hide what another copy moved since. Switched connections: fork_prepare_one. The
 * registry's lock is held from here until the fork is over (san_sock_atfork_parent, _child), so
 * the child's registry is the one these records describe.
 */
void san_sock_atfork_prepare(void)
{
	struct san_sock *s;
	struct fork_rec *r;
	size_t cap = 0, n = 0;

	/* first: an engine between its two looks at a candidate sees that a fork came between */
	__atomic_add_fetch(&fork_gen, 1, __ATOMIC_SEQ_CST);
	/* a fork's records are socks': lite candidates become ones (an accept meanwhile: its own) */
	lite_settle_all(0);

	/* each one's lock is taken outside reg_lock (a close takes them the other way round) */
	pthread_mutex_lock(&reg_lock);
	for (s = reg_list; s; s = s->proc->next)
		cap++;
	pthread_mutex_unlock(&reg_lock);
	/* room for the socks registered meanwhile, which the child will not use */
	fork_cap = cap ? 2 * cap + 64 : 0;
	fork_recs = fork_cap && !san_fault(SAN_FAULT_FORK_NOMEM) ? calloc(fork_cap, sizeof(*fork_recs))
					   : NULL;
	fork_nrecs = 0;
	if (!fork_recs) {
		/* none, or no memory: candidates stay TCP (san_sock_atfork_parent), the rest orphans */
		pthread_mutex_lock(&reg_lock);
		return;
	}
	{
		bool cand[cap];

		pthread_mutex_lock(&reg_lock);
		for (s = reg_list; s && n < cap; s = s->proc->next) {
			bool in_reg = reg && reg[s->fd] == s;

			cand[n] = !s->dropped && !s->attempted && in_reg && !s->forked;
			s->proc->refs++;
			fork_recs[n++] = (struct fork_rec){ .s = s, .proc = s->proc, .ref = true,
							    .active = s->role == SAN_UP_ROLE_A };
		}
		pthread_mutex_unlock(&reg_lock);
		for (size_t i = 0; i < n; i++) {
			san_sock_lock(fork_recs[i].s);
			fork_prepare_one(&fork_recs[i], cand[i]);
			pthread_mutex_unlock(&fork_recs[i].s->lock);
		}
	}
	fork_nrecs = n;
	qsort(fork_recs, fork_nrecs, sizeof(*fork_recs), fork_rec_cmp);
	pthread_mutex_lock(&reg_lock);
	/* registered since: recorded without a copy (the child drops them; so does the parent) */
	for (s = reg_list; s && n < fork_cap; s = s->proc->next)
		if (!fork_rec_find(s))
			fork_recs[n++] = (struct fork_rec){ .s = s, .proc = s->proc,
							    .active = s->role == SAN_UP_ROLE_A };
	if (n > fork_nrecs) {
		fork_nrecs = n;
		qsort(fork_recs, fork_nrecs, sizeof(*fork_recs), fork_rec_cmp);
	}
	/*
	 * A close may have taken a shared one out of the registry since its record was made (a
	 * thread past reg_remove, not yet at its let-go): the child will not have it, so the raise
	 * is undone in the parent (fork_unshare) and the child takes nothing of it.
	 */
	for (unsigned int i = 0, end = reg_numbers_end(); reg && i < end; i++)
		if (reg[i] && (r = fork_rec_find(reg[i])))
			r->in_reg = true;
	for (size_t i = 0; i < fork_nrecs; i++)
		if (fork_recs[i].shared && !fork_recs[i].in_reg)
			fork_recs[i].shared = false, fork_recs[i].unshare = true;
}

/*
 * act(s, arg) with s's lock held, for every sock that pick(s, arg) chooses under reg_lock: taken
 * 64 at a time, each with a reference, locked outside reg_lock (a close takes the two the other
 * way round). act must make pick false for s, or the next batch would take it again.
 */
static void sock_each(bool (*pick)(struct san_sock *s, void *arg),
		      void (*act)(struct san_sock *s, void *arg), void *arg)
{
	struct san_sock *list[64];
	struct san_sock *s;
	int n, i;

	do {
		n = 0;
		pthread_mutex_lock(&reg_lock);
		for (s = reg_list; s && n < 64; s = s->proc->next)
			if (pick(s, arg)) {
				s->proc->refs++;
				list[n++] = s;
			}
		pthread_mutex_unlock(&reg_lock);
		for (i = 0; i < n; i++) {
			s = list[i];
			san_sock_lock(s);
			act(s, arg);
			pthread_mutex_unlock(&s->lock);
			san_sock_put(s);
		}
	} while (n == 64);
}

/*
 * A seccomp sandbox comes (san_core_sandboxed): every candidate not in an upgrade stays TCP.
 * True when a connection is switched, committed or in an upgrade (B paused may not let go: it
 * answered ACCEPT), whose calls must stay ours.
 */
static bool sandbox_pick(struct san_sock *s, void *arg)
{
	if (s->dropped || s->proc->closing)
		return false;
	if (s->attempted || s->committed) {
		*(bool *)arg = true;
		return false;
	}
	return true;
}

static void sandbox_drop(struct san_sock *s, void *arg)
{
	if (!s->dropped && !s->attempted && !s->committed)
		san_sock_drop(s, SAN_R_POLICY);
	else if (!s->dropped)
		*(bool *)arg = true;
}

bool san_sock_sandbox(void)
{
	bool kept = false;

	lite_settle_all(SAN_R_POLICY);
	sock_each(sandbox_pick, sandbox_drop, &kept);
	return kept;
}

/* After fork(), in the parent: the copies it made are forked; those without counts stay TCP. */
static bool parent_pick(struct san_sock *s, void *arg)
{
	return !s->dropped && !s->attempted && !s->forked && reg && reg[s->fd] == s;
}

static void parent_mark(struct san_sock *s, void *arg)
{
	if (s->dropped || s->attempted) {
		/* (taken by a PROPOSE meanwhile: the fork generation refuses it) */
	} else if (!s->fork_base_ok) {
		san_sock_drop(s, SAN_R_STATE);
	} else {
		s->forked = true;
		sock_flags_all(s, SAN_FDF_FORKED, 0);
	}
}

/*
 * A raise the child will not take back (san_sock_atfork_prepare): the holder and user counted for
 * it go. If this process's close came meanwhile and let go believing another user would say the
 * end, this is the last user now, and says it as that close would have. A reference held.
 */
static void fork_unshare(struct san_sock *s)
{
	san_sock_lock(s);
	__atomic_sub_fetch(&s->holders, 1, __ATOMIC_ACQ_REL); /* (ours stays: >= 1) */
	if (!__atomic_sub_fetch(&s->users, 1, __ATOMIC_ACQ_REL) && s->proc->let_go)
		sock_end_last(s);
	pthread_mutex_unlock(&s->lock);
}

/*
 * fork() through our wrapper (preload/san_exec.c): the parent's handler cannot tell a failed fork
 * (glibc runs the parent handlers then too) from one that made a child, so the connections it
 * shared are kept here, each with its reference, until the wrapper says (san_sock_fork_done).
 * Forks libc makes itself (daemon()) do not come through the wrapper: those count as done.
 */
static __thread bool fork_in_wrapper;
static __thread struct san_sock **fork_pending;
static __thread size_t fork_npending;

void san_sock_fork_begin(void)
{
	fork_in_wrapper = true;
}

void san_sock_fork_done(bool failed)
{
	fork_in_wrapper = false;
	for (size_t i = 0; i < fork_npending; i++) {
		if (failed)
			fork_unshare(fork_pending[i]); /* no child: the raises were for nobody */
		san_sock_put(fork_pending[i]);
	}
	free(fork_pending);
	fork_pending = NULL;
	fork_npending = 0;
}

void san_sock_atfork_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
	fork_pending = fork_in_wrapper && fork_nrecs ? calloc(fork_nrecs, sizeof(*fork_pending)) : NULL;
	for (size_t i = 0; i < fork_nrecs; i++) {
		free(fork_recs[i].snap);
		if (fork_recs[i].unshare)
			fork_unshare(fork_recs[i].s);
		if (fork_recs[i].shared && fork_recs[i].ref && fork_pending)
			fork_pending[fork_npending++] = fork_recs[i].s; /* (its reference kept) */
		else if (fork_recs[i].ref)
			san_sock_put(fork_recs[i].s);
	}
	free(fork_recs);
	fork_recs = NULL;
	fork_nrecs = 0;
	sock_each(parent_pick, parent_mark, NULL);
}

/*
 * Before a forked candidate switches: no other process of the family holds it (the holders'
 * scan, outside any lock: it reads /proc). 0: alone; -EBUSY: another holds it (perhaps only
 * until its close: try later); -E2BIG: the family is too large to look at.
 */
int san_sock_forked_alone(struct san_sock *s)
{
	struct stat st;
	int r;

	if (!s->forked)
		return 0;
	if (fstat(s->tcp, &st) < 0)
		return -EBADF;
	r = san_forked_others_hold((uint64_t)st.st_ino);
	return r == 1 ? -EBUSY : r;
}

/*
 * The bytes we counted each way are where the kernel's stream is: nobody moved any behind our
 * wrappers. A forked copy compares with the difference taken at the fork (another process may
 * have moved bytes since); any other candidate with the difference every connection starts
 * with: the SYN, acknowledged on the side that sent it (A), nothing else. Bytes moved behind
 * our wrappers are stdio's (glibc's fread and fwrite make their system calls inside libc,
 * where no preload sees them), raw system calls, io_uring: a switch would put its MARK at the
 * wrong offset, and the connection stays TCP. Lock held, no call of ours in the kernel.
 */
int san_sock_counts(struct san_sock *s)
{
	int64_t dtx, drx;
	bool same;

	if (!sock_kernel_diff(s, &dtx, &drx))
		return -EAGAIN;
	if (s->forked)
		same = s->fork_base_ok && dtx == s->fork_dtx && drx == s->fork_drx;
	else
		same = dtx == (s->role == SAN_UP_ROLE_A ? 1 : 0) && drx == 0;
	return same ? 0 : -EXDEV;
}

bool san_sock_counts_ok(struct san_sock *s)
{
	return san_sock_counts(s) == 0;
}

/*
 * Just before exec: the new program cannot speak the session protocol, so each switched fd it
 * would inherit is replaced, in this process only, by one end of a fresh socketpair whose other
 * end is closed: it reads end-of-file, writes fail EPIPE, never a byte of the rings. The parent
 * (after fork) or this process (if the exec fails) keeps the connection: the notification
 * socket lives on in the other copies (over verbs its sends have ended, unless the exec was
 * sure to fail: san_core_before_exec). Runs in a vfork child too: no locks, no allocation,
 * only the fd table (read without locks) and system calls on this process's own fds.
 */
/*
 * exec() while another thread sleeps in a receive whose buffer is offered to the peer (direct
 * grant): the new program must never get the peer's write, so no offer survives (and none is
 * made again: direct_off). A vfork child shares our memory, which outlives its exec: nothing
 * to do there, and it must not take our locks.
 */
/*
 * Returns whether fd's stream is on the SAN: switched, or committed while the application still
 * holds the TCP number (a pure sender; the TCP socket may still hold the peer's MARK, which the
 * new program would read as data).
 */
static bool settle_for_exec(int fd, bool switched, uint32_t flags)
{
	struct san_sock *s;
	bool san;

	if (!san_fdtable_owned()) /* a vfork child: no locks; the table says what it needs */
		return switched || (flags & SAN_FDF_COMMITTED);
	s = reg_get(fd); /* (a lite candidate is plain TCP to the new program) */
	if (!s)
		return switched;
	san_sock_lock(s);
	san = switched || s->committed;
	if (s->prep && !san) {
		uint64_t x;

		/*
		 * Prepared without a pause: the new program must not meet the peer's MARK. Where
		 * the peer committed it gets a switched connection's end of file; else the
		 * connection stays TCP, here too if the exec fails.
		 */
		san = s->rx != SK_RX_TCP || sock_withdraw(s, &x, "exec") == 1;
		if (!san)
			san_sock_drop(s, SAN_R_STATE);
	}
	san_conn_cork_flush(s); /* (the new program has no tick for it) */
	if (s->proc->orphan || s->proc->from_fork) {
		/*
		 * A fork child's copy (the slots and the plugs are the parent's), or a connection a
		 * fork shared with it: an offer still out is a thread's of the parent, which goes on.
		 * The dup3 below replaces only this process's number of X: X itself stays open in
		 * the processes that keep the connection.
		 */
		pthread_mutex_unlock(&s->lock);
		san_sock_put(s);
		return san;
	}
	if (s->rxr.sh)
		san_conn_direct_drop(s);
	/* another thread's send offered its buffer: the new program's memory is not it */
	if (s->src_out)
		san_conn_src_drop(s);
	pthread_mutex_unlock(&s->lock);
	san_sock_put(s);
	return san;
}

void san_sock_before_exec(void)
{
	unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);

	/* no connection was ever tracked: nothing to do (a racy read is fine, exec is serial) */
	if (!__atomic_load_n(&reg_list, __ATOMIC_RELAXED))
		return;
	for (unsigned int fd = 0; fd < hw; fd++) {
		struct san_fd *f = san_fd_get((int)fd);
		int fl, sv[2];

		if (!f || !san_fd_managed_state(san_fd_state(f)))
			continue;
		if (!settle_for_exec((int)fd, san_fd_state(f) == SAN_FD_SWITCHED, san_fd_flags(f)))
			continue;
		fl = san_sys_fcntl((int)fd, F_GETFD, 0);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		if (san_sys_socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
			continue;
		san_sys_close(sv[1]);
		(void)san_sys_dup3(sv[0], (int)fd, 0);
		san_sys_close(sv[0]);
	}
}

/*
 * fork(), in the child: the sock it goes on with for record r. A shared one is the parent's slot
 * (its engine watches the anchor once the child first uses it); any other is the copy taken
 * before the fork, moved into a slot of the child's own. NULL: none (registered after the
 * copies were taken, or no memory): the child's numbers of it stay TCP.
 */
static struct san_sock *fork_child_sock(struct fork_rec *r)
{
	struct san_sock *c;

	if (r->ref)
		r->proc->refs--; /* san_sock_atfork_prepare's, which the parent lets go */
	/* the parent's waits and flag, not the child's (san_sock_proc) */
	r->proc->wait_watched = false;
	r->proc->rx_armer = 0;
	if (r->shared) {
		r->proc->watch_due = r->proc->from_fork = true;
		return r->s;
	}
	if (!r->snap || !(c = san_slab_alloc(&sock_slab)))
		return NULL;
	memcpy(c, r->snap, sizeof(*c));
	sock_sync_init(c);
	c->holders = c->users = 1;
	return c;
}

/*
 * A number of the child's with no sock (no memory for its copy at the fork): passing through, it
 * would be the notification socket X (switched: doorbell bytes read as data) or a TCP socket with
 * the peer's MARK in it (committed). So a switched or committed one is made what an orphan is, a
 * reset: the number now names one end of a socketpair whose other end went with a byte unread
 * (the kernel's ECONNRESET there, then EOF). A candidate's is its TCP socket: it passes through.
 */
static void child_fd_reset(int fd)
{
	struct san_fd *f = san_fd_get(fd);
	int sv[2], fl;

	if (!f || (san_fd_state(f) != SAN_FD_SWITCHED && !(san_fd_flags(f) & SAN_FDF_COMMITTED)))
		return;
	fl = san_sys_fcntl(fd, F_GETFD, 0);
	if (san_sys_socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	(void)san_sys_send(sv[0], "r", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	san_sys_close(sv[1]);
	(void)san_sys_dup3(sv[0], fd, fl > 0 && (fl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	san_sys_close(sv[0]);
	san_warn("fd %d: no memory for this fork child's copy of the connection: it fails", fd);
}

/*
 * The child's references, counted again: its copy of refs is the parent's, which counted the
 * parent's threads inside a call on the connection at the fork (and its engine's watchers, let
 * go by san_up_unwatch_child), none of which the child has. Left as copied, a connection the child
 * closes never reaches 0 there: its copies of the anchor, side and Y sockets stay open for its
 * whole life (the peer does not see the end when the parent goes) and it never lets go of the
 * shared slot (the parent's last close cannot free it). What the child holds is its numbers in the
 * registry; a sock no number names is freed now.
 */
static void child_recount_refs(void)
{
	struct san_sock *s, **pp;

	for (s = reg_list; s; s = s->proc->next)
		s->proc->refs = 0;
	for (unsigned int n = 0, end = reg_numbers_end(); reg && n < end; n++)
		if (reg[n])
			reg[n]->proc->refs++;
	for (pp = &reg_list; (s = *pp);) {
		if (s->proc->refs) {
			pp = &s->proc->next;
			continue;
		}
		*pp = s->proc->next;
		sock_free(s);
	}
}

/*
 * The child of fork(). A switched shm connection the fork shared stays one connection used by
 * both processes (docs/engine.md §7.1). Every other sock is the child's own copy, as its rules
 * are each process's: candidates stay candidates, forked (san_sock_atfork_prepare), unless their
 * counts could not be taken; other switched or committed connections (verbs: a QP is its
 * process's; one between its commit and its swap) are orphans, whose calls fail ECONNRESET while
 * the parent keeps them. Single-threaded here: our private locks are re-initialised, and no call
 * of ours is in the kernel. The slots of socks it does not share are never read here.
 */
void san_sock_atfork_child(void)
{
	struct san_sock *s, **pp;
	struct fork_rec *r;

	pthread_mutex_init(&reg_lock, NULL);
	san_ep_early_atfork_child();
	san_epshadow_atfork_child();
	san_rxwatch_atfork_child();
	san_cork_atfork_child();
	n_tx_mute = 0;
	b_untouched = 0;
	san_prov_atfork_child();
	/* a lite candidate accepted while the fork went on (its accept made it a sock after the
	 * prepare handler's look): the parent's connection; the child's number stays TCP */
	lite_settle_all(SAN_LITE_CHILD);
	/*
	 * The child's copies go into chunks of its own: a slot taken from a chunk the parent shares
	 * would stay taken in the parent's bitmap when the child exits without a close (a pre-fork
	 * server's children do), ~2 KB lost per connection for the parent's life. The slots it
	 * shares still go back to their own chunk (san_slab_free finds it from the slot).
	 */
	san_slab_forget(&sock_slab);
	for (size_t i = 0; i < fork_nrecs; i++)
		fork_recs[i].mine = fork_child_sock(&fork_recs[i]);
	/* the registry's list, through the private parts; a sock of none is left out */
	for (pp = &reg_list; (s = *pp);) {
		if (!(r = fork_rec_find(s))) {
			*pp = NULL; /* (no record: the fork found no memory for them) */
			break;
		}
		if (r->mine) {
			*pp = r->mine;
			pp = &r->proc->next;
		} else {
			*pp = r->proc->next;
		}
	}
	for (unsigned int n = 0, end = reg_numbers_end(); reg && n < end; n++) {
		if (!reg[n])
			continue;
		r = fork_rec_find(reg[n]);
		reg[n] = r ? r->mine : NULL;
		if (!reg[n]) {
			child_fd_reset((int)n);
			san_sock_drop_fd((int)n, r && r->active, SAN_R_STATE);
		}
	}
	for (size_t i = 0; i < fork_nrecs; i++)
		free(fork_recs[i].snap);
	free(fork_recs);
	fork_recs = NULL;
	fork_nrecs = 0;
	for (s = reg_list; s; s = s->proc->next) {
		san_up_unwatch_child(s); /* the engine thread did not survive */
		san_up_unname_child(s);
		s->proc->name_decided = false;
		s->proc->name_retry_ns = s->proc->name_give_up_ns = 0;
		if (s->proc->tx_mute) {
			/* the epoll sets are the parent's too: only our own bookkeeping */
			s->proc->tx_mute = false;
			sock_flags_all(s, 0, SAN_FDF_TXMUTE);
		}
		s->proc->stc = NULL; /* the parent's file: the child has its own (san_stats_conn.h) */
		if (s->proc->watch_due) {
			/* shared with the parent: its state is both processes' from now on; its
			 * slot in the child's own file is claimed at the child's first data call */
			s->proc->stc_child = true;
		} else if (s->committed || s->swapped || (s->prep && s->rx != SK_RX_TCP)) {
			/* (prepared, the peer committed: our copy cannot read its MARK for us) */
			s->proc->orphan = true;
			s->err = -ECONNRESET;
			/* the parent's to count, not this copy's exit's */
			sock_flags_all(s, SAN_FDF_INHERITED, 0);
			/* the offers in the shared slots are the parent's: never settle them here */
			s->src_out = s->direct_out = s->direct_claimed = false;
		} else if (!s->dropped && !s->attempted && s->fork_base_ok) {
			s->forked = true;
			s->proc->stc_child = true; /* (and INHERITED, until then: its exit's count) */
			s->in_kernel = 0;
			/* the parent's calls and waits were the parent's */
			s->touched = false;
			sock_flags_all(s, SAN_FDF_FORKED | SAN_FDF_INHERITED, SAN_FDF_TOUCHED);
		} else if (!s->dropped) {
			/*
			 * Attempted (a handshake under way, a preparation the fork ended) or its
			 * counts unknown: TCP here. Its outcome is the parent's to count, not
			 * this copy's exit's (SAN_FDF_INHERITED, below, as every fallen-back fd).
			 */
			s->dropped = true;
			sock_drop_others(s);
			if (reg && reg[s->fd] == s) {
				reg[s->fd] = NULL;
				s->proc->refs--;
			}
			san_sock_drop_fd(s->fd, s->role == SAN_UP_ROLE_A, 0);
		}
		if (s->role == SAN_UP_ROLE_B && !s->touched && !s->proc->orphan && reg && reg[s->fd] == s)
			b_untouched++; /* (sock_touch or the close takes it back) */
	}
	child_recount_refs();
	/*
	 * The connections that fell back before the fork: the parent counts them at their end,
	 * not this copy's exit (a redis BGSAVE child counted every one's TCP bytes again). A
	 * close here still counts, as before (a pre-fork server's child that serves one).
	 */
	for (unsigned int n = 0, hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED); n < hw; n++) {
		struct san_fd *f = san_fd_get((int)n);

		if (f && san_fd_state(f) == SAN_FD_CONN)
			(void)san_fd_set_flags((int)n, SAN_FDF_INHERITED, 0);
	}
}

/*
 * Do a closing candidate's own counts hold every byte of its connection? Only when every call on
 * it went through us in this process: no fork copied it, no other number named it, it never
 * passed through (dropped), and bytes moved (an A whose connect() never completed has moved
 * none, and is not counted at all). Bytes a program moves behind the wrappers (C stdio on the
 * socket, raw system calls) are not in them: such a connection is found out only if it comes
 * to a proposal (docs/protocol.md §9.8); otherwise its stats miss those bytes.
 */
static bool sock_counts_whole(const struct san_sock *s, int fd)
{
	struct san_fd *f = san_fd_get(fd);

	return san_stats_enabled() && f && !s->dropped && !s->forked && (s->tcp_tx || s->tcp_rx) &&
	       !(san_fd_flags(f) & (SAN_FDF_DUP | SAN_FDF_FORKED));
}

/*
 * A lite candidate closed on TCP: its bytes are the ones its calls moved, as a candidate's
 * (sock_counts_whole; calls of other threads still inside may add a few after this).
 */
static void lite_closed(int fd, struct san_lite *l)
{
	uint64_t tx = __atomic_load_n(&l->tx, __ATOMIC_RELAXED);
	uint64_t rx = __atomic_load_n(&l->rx, __ATOMIC_RELAXED);

	if (!san_stats_enabled() || !(tx || rx))
		return;
	san_stats_add(SAN_STAT_TCP_TX_BYTES, tx);
	san_stats_add(SAN_STAT_TCP_RX_BYTES, rx);
	san_fd_set_flags(fd, SAN_FDF_TCP_ENDED, 0);
}

/*
 * close(): the sock leaves the registry. A switched connection says DISCONNECT (or ABORT when
 * unread data or SO_LINGER 0 make it a reset, as TCP would) and closes its anchor; the
 * caller then closes the fd number itself.
 */
bool san_sock_on_close(int fd)
{
	struct san_sock *s;
	struct san_lite *l;
	uint32_t gen;

	/* a vfork child's close is its own: the parent's connection stays as it is */
	if (!san_fdtable_owned())
		return false;
	if ((l = san_lite_shut(fd, &gen))) {
		lite_closed(fd, l);
		return false;
	}
	s = reg_remove(fd);

	if (!s)
		return false;
	if (s->proc->orphan) {
		/* A fork child's copy: the parent owns the rings and the anchor's fate. */
		san_sock_put(s);
		return false;
	}
	san_sock_lock(s);
	if (s->proc->fdrefs == 1 && s->role == SAN_UP_ROLE_B && !s->touched) {
		/* it leaves the waits' count (san_sock_any_untouched); its number is going */
		s->touched = true;
		__atomic_sub_fetch(&b_untouched, 1, __ATOMIC_RELAXED);
	}
	if (--s->proc->fdrefs > 0) {
		if (s->fd == fd) {
			san_sock_tx_unmute(s, true); /* the mute is this number's */
			/*
			 * The number the connection goes by goes: another one still names it, X
			 * after the swap, the TCP socket before it (a candidate's several numbers,
			 * as inherited: san_sock_adopt).
			 */
			pthread_mutex_lock(&reg_lock);
			for (unsigned int i = 0; i < reg_size; i++)
				if (reg[i] == s) {
					s->fd = (int)i;
					if (s->swapped)
						s->xfd = (int)i;
					else
						s->tcp = (int)i;
					break;
				}
			pthread_mutex_unlock(&reg_lock);
		}
		/* its registrations go with it (the kernel's stay, keyed on the number) */
		for (int i = 0; i < s->proc->nep;)
			if (s->proc->ep[i].fd == fd)
				s->proc->ep[i] = s->proc->ep[--s->proc->nep];
			else
				i++;
		pthread_mutex_unlock(&s->lock);
		san_sock_put(s);
		return false;
	}
	san_sock_tx_unmute(s, false);
	s->proc->closing = true;
	san_conn_cork_flush(s); /* (a close shared with a fork says nothing that would ring) */
	if (s->prep && s->rx == SK_RX_TCP && !s->committed) {
		uint64_t x;

		/*
		 * No pause, not committed either way: the peer stays on TCP and meets our FIN or
		 * RST. (Committed our way: the peer commits too, as its reader meets our MARK.)
		 */
		(void)sock_withdraw(s, &x, "close");
	}
	/* its slot is released with the number (san_stats_fd_close): a new connection's then */
	s->proc->stc = NULL;
	sock_learn_peer(s); /* (the peer's X, if it committed since our last call: its MARK below) */
	if ((s->committed || s->prep) && !s->swapped && s->rx == SK_RX_DRAIN &&
	    s->tcp_rx == s->x_peer) {
		/*
		 * The application read everything before the peer's MARK but not the MARK: left
		 * unread, it would make the kernel answer our close with a reset, which can destroy
		 * data still on its way to the peer. Take it off first (briefly: it is in flight).
		 */
		for (int i = 0; i < 50 && s->mark_have < SAN_MARK_LEN; i++) {
			long n = san_sys_recv(s->tcp, s->mark + s->mark_have,
					      SAN_MARK_LEN - s->mark_have, MSG_DONTWAIT);
			struct pollfd p = { s->tcp, POLLIN, 0 };

			if (n > 0) {
				s->mark_have += (unsigned int)n;
				continue;
			}
			if (n != -EAGAIN || san_sys_poll(&p, 1, 1) < 0)
				break;
		}
	}
	san_rxwatch_unquiet(s); /* its data, if any, on X for the waits of whoever goes on */
	/*
	 * A connection a fork shared ends when the last process lets go, as a TCP socket does:
	 * until then the others go on with it, and this process only drops its copies.
	 */
	bool others = sock_let_go(s), moved;

	if (others)
		san_debug("fd %d: closed here, another process still uses the connection", fd);
	else
		sock_end_last(s);
	moved = sock_moved(s);
	if (moved && !s->swapped) {
		/* Switched, though the application never read past the MARK: count it so. */
		san_fd_set_state(fd, SAN_FD_SWITCHED);
		count_switched(s);
	}
	/*
	 * What went over TCP before the switch is counted once, by the process that lets go last
	 * (as at an exit, san_sock_stats_exit): each sharer's copy of the counts holds the same
	 * bytes, and every close counted them before.
	 */
	if (moved) {
		if (!others && san_stats_enabled()) {
			san_stats_add(SAN_STAT_TCP_TX_BYTES, s->tcp_tx);
			san_stats_add(SAN_STAT_TCP_RX_BYTES, s->tcp_rx);
		}
	} else if (sock_counts_whole(s, fd)) {
		/*
		 * A candidate that ends on TCP: its bytes are the ones our calls moved, so the
		 * close need not ask the kernel (TCP_INFO: 0.4 us, about 1.5 % of a short
		 * connection's life on each side). Its fallback reason is counted at the close.
		 */
		san_stats_add(SAN_STAT_TCP_TX_BYTES, s->tcp_tx);
		san_stats_add(SAN_STAT_TCP_RX_BYTES, s->tcp_rx);
		san_fd_set_flags(fd, SAN_FDF_TCP_ENDED, 0);
	}
	if (!s->swapped)
		s->tcp = -1; /* the number goes with the application's close: never touch it again */
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	san_up_unwatch(s);
	san_sock_put(s);
	return false;
}

/*
 * How long a wait spins before it sleeps: SANSWITCH_SPIN_US while spins pay off, less while they
 * do not. A spin that ends with nothing found has cost its whole length, and on a host whose
 * CPUs are all busy it took that time from the very peer it waited for (a 64 B ping-pong's p99
 * went from 3 to 59 us here while a qemu guest kept both vCPUs busy). So each spin that finds
 * nothing halves the budget (down to a sixteenth), each that finds something doubles it (up to
 * SANSWITCH_SPIN_US). One budget per process, updated without a lock: an approximate count is
 * all this needs. Measured (sockperf 64 B, 2 vCPUs): no change on a quiet machine (p50 1.7,
 * p99 2.6-3.4 us); with both vCPUs hogged p99 10-107 us instead of 1500-2500 (p50 2-10 instead
 * of 58); with one hogged p99 10-26 instead of 58-61, but p50 7.5 instead of 1.6-2.6 (the
 * spins that fail when both ends share a CPU shrink it for the ones that would not).
 */
static unsigned int spin_budget_us;

unsigned int san_sock_spin_us(void)
{
	unsigned int b = __atomic_load_n(&spin_budget_us, __ATOMIC_RELAXED);

	return b && b <= san_cfg.spin_us ? b : san_cfg.spin_us;
}

/*
 * The spin ran out, and the sleep after it ended with something after waited_ns in all (from
 * the wait's start). Halving alone has two stable states: a budget above the peer's
 * turnaround keeps finding (it stays), one below it always fails (it stays too, at the floor),
 * and a request/response server whose client answers in 10 us stuck at 3 us, sleeping and
 * being rung for every request. A wait that ended within SPIN_US would have been caught by
 * a spin of about that length: the budget becomes that, with a margin. Not when the peer
 * answered from this very CPU (peer_here): there our sleep is what let it run, and a longer
 * spin would only have delayed it.
 */
void san_sock_spin_late(uint64_t waited_ns, bool peer_here)
{
	uint64_t us = waited_ns / 1000u, want = us + us / 2 + 1;

	if (!san_cfg.spin_us || peer_here || us > san_cfg.spin_us)
		return;
	if (want > san_cfg.spin_us)
		want = san_cfg.spin_us;
	if (want > san_sock_spin_us())
		__atomic_store_n(&spin_budget_us, (unsigned int)want, __ATOMIC_RELAXED);
}

void san_sock_spin_result(bool found)
{
	unsigned int b = san_sock_spin_us(), floor = san_cfg.spin_us / 16 ? san_cfg.spin_us / 16 : 1;

	if (!san_cfg.spin_us)
		return;
	b = found ? (b * 2 < san_cfg.spin_us ? b * 2 : san_cfg.spin_us) : (b / 2 > floor ? b / 2 : floor);
	__atomic_store_n(&spin_budget_us, b, __ATOMIC_RELAXED);
}
