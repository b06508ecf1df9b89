/* core — per-process fd table: what the switch knows about each fd number, read without locks. */
#ifndef SAN_FDTABLE_H
#define SAN_FDTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

/*
 * Life of an entry. Only kernel TCP sockets (see san_fd_tcp_candidate()) ever
 * get one; every other fd stays SAN_FD_UNTRACKED and is never touched.
 *
 *   socket() ──> TCP ──listen()──> LISTENER ──accept()──> PASSIVE (new fd)
 *                 └──connect()──> ACTIVE
 *   ACTIVE/PASSIVE ──(engine, later)──> SWITCHED
 *   close() ──> UNTRACKED;  dup*() copies the entry to the new number.
 *
 * SWITCHED means the data path of the fd belongs to the engine; nothing sets
 * it in this version.
 */
enum san_fd_state {
	SAN_FD_UNTRACKED = 0,
	SAN_FD_TCP,
	SAN_FD_LISTENER,
	SAN_FD_ACTIVE,
	SAN_FD_PASSIVE,
	SAN_FD_SWITCHED,
	SAN_FD_CONN, /* connected TCP that stays TCP (upgrade over): plain pass-through */
	SAN_FD_NR_STATES,
};

#define SAN_FDF_NONBLOCK 0x1u /* O_NONBLOCK last seen set on this fd */
#define SAN_FDF_INET6 0x2u    /* AF_INET6 socket (else AF_INET) */
#define SAN_FDF_DUP 0x4u      /* took part in a dup: other fds may share its connection */
#define SAN_FDF_OPENED 0x8u   /* SAN_FD_CONN: we connect()ed (the active side) */
#define SAN_FDF_COUNTED 0x10u /* SAN_FD_CONN: its fallback reason is already counted */
#define SAN_FDF_TXMUTE 0x20u  /* its POLLOUT comes from the notification socket (san_sock_tx_mute) */
#define SAN_FDF_COMMITTED 0x40u /* its connection committed to the SAN (exec must not hand it on) */
#define SAN_FDF_SNDBUF 0x80u	/* the application set SO_SNDBUF (the kernel's lock: no autotuning) */
#define SAN_FDF_RCVBUF 0x100u	/* the application set SO_RCVBUF */
#define SAN_FDF_FORKED 0x200u	/* a fork() copied its connection: another process may hold it */
#define SAN_FDF_TOUCHED 0x400u	/* B: its process touched it (san_sock_touch_fd): the waits skip it */
#define SAN_FDF_TCP_ENDED 0x800u /* closing: its TCP bytes are counted (san_sock_on_close), not its fallback */
#define SAN_FDF_STATSLOT 0x1000u /* its connection may have a slot in the stats file (san_stats_conn.c) */
/* a fork child's copy it never moved data on: the parent counts it, not this process's exit */
#define SAN_FDF_INHERITED 0x2000u

/*
 * One slot per fd number, zero when untracked (a fresh mmap page is already
 * a page of untracked slots). Fields are read and written only with
 * __atomic builtins: readers never lock.
 */
struct san_fd {
	uint32_t state; /* enum san_fd_state */
	uint32_t flags; /* SAN_FDF_* */
};

struct san_fdtable {
	struct san_fd *slots; /* mmap'd once, MAP_NORESERVE; never unmapped while in use */
	unsigned int size;    /* number of slots; 0 until allocated, so every fd is untracked */
	unsigned int hiwater; /* 1 + highest fd ever tracked: bounds range clears */
	int nswitched;	      /* entries in SAN_FD_SWITCHED: waits skip their scan at 0 */
	int owner;	      /* pid allowed to write the table; 0: any (see san_fdtable_set_owner()) */
};

extern struct san_fdtable san_fdt;

#define SAN_FDTABLE_MIN (1u << 16) /* slots even when RLIMIT_NOFILE is lower */
#define SAN_FDTABLE_MAX (1u << 20) /* Linux's default fs.nr_open */

unsigned int san_fdtable_size_for(unsigned long long rlim_max);
int san_fdtable_init(void);
int san_fdtable_alloc(unsigned int nr);
void san_fdtable_free(void);
void san_fdtable_set_owner(int pid);
bool san_fdtable_owned(void);

/*
 * Children that share our memory and are not our threads (vfork(), clone(CLONE_VM)) started and
 * not yet known to be gone: raised before such a child exists, lowered by the parent once it
 * runs again (vfork) and never for a CLONE_VM child that lives on. A fork that runs no fork
 * handlers (_Fork(), clone() without CLONE_VM) leaves it raised in its child only. Only where the
 * preload counts them (SAN_SHARED_CHILDREN_COUNTED: its vfork(), clone() and _Fork() wrappers,
 * preload/san_exec.c) may san_fdtable_owned() trust a 0 without asking the kernel for our pid.
 */
extern int san_shared_children __attribute__((visibility("hidden")));
#if defined(__x86_64__)
#define SAN_SHARED_CHILDREN_COUNTED 1
#endif

bool san_fd_tcp_candidate(int domain, int type, int protocol);
int san_fd_track(int fd, enum san_fd_state state, uint32_t flags);
int san_fd_set_state(int fd, enum san_fd_state state);
int san_fd_set_flags(int fd, uint32_t set, uint32_t clear);
int san_fd_copy(int from, int to);
enum san_fd_state san_fd_clear(int fd);
void san_fd_clear_range(unsigned int first, unsigned int last);
const char *san_fd_state_name(enum san_fd_state state);

/* The slot of @fd, or NULL when @fd is negative or beyond the table (always untracked). */
static inline struct san_fd *san_fd_slot(int fd)
{
	unsigned int size = __atomic_load_n(&san_fdt.size, __ATOMIC_ACQUIRE);

	if (likely((unsigned int)fd < size))
		return &san_fdt.slots[fd];
	return NULL;
}

static inline enum san_fd_state san_fd_state(const struct san_fd *f)
{
	return (enum san_fd_state)__atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
}

static inline uint32_t san_fd_flags(const struct san_fd *f)
{
	return __atomic_load_n(&f->flags, __ATOMIC_RELAXED);
}

/* The entry of @fd if it is tracked, else NULL. */
static inline struct san_fd *san_fd_get(int fd)
{
	struct san_fd *f = san_fd_slot(fd);

	if (f && san_fd_state(f) != SAN_FD_UNTRACKED)
		return f;
	return NULL;
}

/* The engine decides this fd's calls: a candidate (ACTIVE, PASSIVE) or SWITCHED. */
static inline bool san_fd_managed_state(enum san_fd_state s)
{
	return (unsigned int)s - SAN_FD_ACTIVE <= SAN_FD_SWITCHED - SAN_FD_ACTIVE;
}

static inline bool san_fd_any_switched(void)
{
	return __atomic_load_n(&san_fdt.nswitched, __ATOMIC_RELAXED) != 0;
}

/*
 * Reentrancy guard. The library's own socket calls (side channels,
 * notification sockets, later) go through the same wrappers as the
 * application's; inside the guard they are never recorded in the table and
 * never handed to the engine. Thread-local, initial-exec: the library is
 * loaded at startup, and the guard is read only off the hot path.
 */
extern __thread int san_fd_guard_depth __attribute__((tls_model("initial-exec")));

static inline void san_fd_guard_enter(void)
{
	san_fd_guard_depth++;
}

static inline void san_fd_guard_leave(void)
{
	san_fd_guard_depth--;
}

static inline bool san_fd_guarded(void)
{
	return san_fd_guard_depth != 0;
}

#endif /* SAN_FDTABLE_H */
