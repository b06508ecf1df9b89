/* core — per-process fd table: what the switch knows about each fd number, read without locks. */
#include <errno.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/san_fdtable.h"

struct san_fdtable san_fdt;

__thread int san_fd_guard_depth __attribute__((tls_model("initial-exec")));

/* clang-format off */
static const char *const san_fd_state_names[SAN_FD_NR_STATES] = {
	[SAN_FD_UNTRACKED] = "untracked",
	[SAN_FD_TCP] = "tcp",
	[SAN_FD_LISTENER] = "listener",
	[SAN_FD_ACTIVE] = "active",
	[SAN_FD_PASSIVE] = "passive",
	[SAN_FD_SWITCHED] = "switched",
	[SAN_FD_CONN] = "conn",
};
/* clang-format on */

const char *san_fd_state_name(enum san_fd_state state)
{
	if ((unsigned int)state < SAN_FD_NR_STATES)
		return san_fd_state_names[state];
	return "?";
}

/*
 * Slots for a process whose hard RLIMIT_NOFILE is @rlim_max. The hard limit
 * bounds every fd number the process can get unless it raises the limit with
 * privileges; an fd beyond the table is untracked, which is the safe
 * pass-through, so the size is a performance bound, not a correctness one.
 */
unsigned int san_fdtable_size_for(unsigned long long rlim_max)
{
	if (rlim_max < SAN_FDTABLE_MIN)
		return SAN_FDTABLE_MIN;
	if (rlim_max > SAN_FDTABLE_MAX)
		return SAN_FDTABLE_MAX;
	return (unsigned int)rlim_max;
}

/*
 * MAP_NORESERVE and anonymous zero pages: 8 MiB of address space at most,
 * but only the pages holding tracked fd numbers are ever written.
 */
int san_fdtable_alloc(unsigned int nr)
{
	void *p;

	if (nr == 0 || nr > SAN_FDTABLE_MAX)
		return -EINVAL;
	if (__atomic_load_n(&san_fdt.size, __ATOMIC_ACQUIRE))
		return -EBUSY;
	p = mmap(NULL, (size_t)nr * sizeof(struct san_fd), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	san_fdt.slots = p;
	san_fdt.hiwater = 0;
	san_fdt.nswitched = 0;
	/* Readers test size first: publish the slots before it. */
	__atomic_store_n(&san_fdt.size, nr, __ATOMIC_RELEASE);
	return 0;
}

int san_fdtable_init(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		rl.rlim_max = SAN_FDTABLE_MIN;
	return san_fdtable_alloc(
		san_fdtable_size_for(rl.rlim_max == RLIM_INFINITY ? ~0ull : rl.rlim_max));
}

/* Unit tests only: the library never frees the table, readers hold no reference. */
void san_fdtable_free(void)
{
	unsigned int size = __atomic_exchange_n(&san_fdt.size, 0, __ATOMIC_ACQ_REL);

	if (size)
		munmap(san_fdt.slots, (size_t)size * sizeof(struct san_fd));
	san_fdt.slots = NULL;
	san_fdt.hiwater = 0;
	san_fdt.nswitched = 0;
}

/*
 * A vfork() child (CPython's subprocess, posix_spawn-like code) shares our
 * memory and runs our close()/dup2()/close_range() wrappers before it execs:
 * any write it made would land in the parent's table and forget the
 * parent's live sockets. So the table remembers the pid it belongs to (set
 * at load and in the fork() child handler, which vfork() does not run), and
 * every writer of a tracked entry first checks it is running in that pid.
 * The raw syscall: getpid() in a vfork child must not be served from any
 * cache shared with the parent. Writers only: the data path never pays it.
 * 0 (unit tests, before load) means no check.
 *
 * That system call was 5 or 6 per short connection on each side (socket or
 * accept, connect, close and its helpers: about 0.6 us of a 25 us life). Where
 * the preload counts the children that share our memory (its own vfork() and
 * clone(), san_shared_children), none alive means no one but our own threads
 * can be running here: the pid is asked only while such a child may exist.
 * A child made by a raw clone or vfork system call, which no wrapper sees, is
 * taken for the owner then, as the data path always took it.
 */
int san_shared_children;

void san_fdtable_set_owner(int pid)
{
	__atomic_store_n(&san_fdt.owner, pid, __ATOMIC_RELAXED);
}

bool san_fdtable_owned(void)
{
	int owner = __atomic_load_n(&san_fdt.owner, __ATOMIC_RELAXED);

	if (owner == 0)
		return true;
#ifdef SAN_SHARED_CHILDREN_COUNTED
	if (likely(__atomic_load_n(&san_shared_children, __ATOMIC_ACQUIRE) == 0))
		return true;
#endif
	return owner == (int)syscall(SYS_getpid);
}

/*
 * The only sockets the switch will ever consider: kernel TCP over IPv4/IPv6.
 * UDP, UNIX, raw, netlink, SCTP (IPPROTO_SCTP) and MPTCP (IPPROTO_MPTCP) are
 * stream or not, but not plain TCP, and are never recorded.
 */
bool san_fd_tcp_candidate(int domain, int type, int protocol)
{
	if (domain != AF_INET && domain != AF_INET6)
		return false;
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM)
		return false;
	return protocol == 0 || protocol == IPPROTO_TCP;
}

static void san_fd_count_switched(enum san_fd_state from, enum san_fd_state to)
{
	if (from == SAN_FD_SWITCHED && to != SAN_FD_SWITCHED)
		__atomic_fetch_sub(&san_fdt.nswitched, 1, __ATOMIC_RELAXED);
	else if (to == SAN_FD_SWITCHED && from != SAN_FD_SWITCHED)
		__atomic_fetch_add(&san_fdt.nswitched, 1, __ATOMIC_RELAXED);
}

static void san_fd_raise_hiwater(int fd)
{
	unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);

	while (hw <= (unsigned int)fd &&
	       !__atomic_compare_exchange_n(&san_fdt.hiwater, &hw, (unsigned int)fd + 1, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static int san_fd_slot_err(int fd)
{
	return fd < 0 ? -EBADF : -ERANGE;
}

/* Give @fd an entry (or replace a stale one). -EBADF/-ERANGE: @fd stays untracked. */
int san_fd_track(int fd, enum san_fd_state state, uint32_t flags)
{
	struct san_fd *f = san_fd_slot(fd);
	enum san_fd_state old;

	if (!f)
		return san_fd_slot_err(fd);
	if (state == SAN_FD_UNTRACKED) {
		san_fd_clear(fd);
		return 0;
	}
	/* A vfork child records nothing: as if the fd were beyond the table. */
	if (unlikely(!san_fdtable_owned()))
		return -ERANGE;
	san_fd_raise_hiwater(fd);
	/* Flags first: whoever sees the state (acquire) sees the flags that go with it. */
	__atomic_store_n(&f->flags, flags, __ATOMIC_RELAXED);
	old = __atomic_exchange_n(&f->state, state, __ATOMIC_ACQ_REL);
	san_fd_count_switched(old, state);
	return 0;
}

/*
 * Move a tracked entry to @state; returns the previous state, or -ENOENT if
 * @fd is untracked (a racing close() won: do not bring the entry back).
 */
int san_fd_set_state(int fd, enum san_fd_state state)
{
	struct san_fd *f = san_fd_slot(fd);
	uint32_t old;

	if (!f)
		return san_fd_slot_err(fd);
	old = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
	if (old == SAN_FD_UNTRACKED || !san_fdtable_owned())
		return -ENOENT;
	do {
		if (old == SAN_FD_UNTRACKED)
			return -ENOENT;
	} while (!__atomic_compare_exchange_n(&f->state, &old, state, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	san_fd_count_switched(old, state);
	return (int)old;
}

int san_fd_set_flags(int fd, uint32_t set, uint32_t clear)
{
	struct san_fd *f = san_fd_get(fd);

	if (!f || !san_fdtable_owned())
		return -ENOENT;
	if (set)
		__atomic_fetch_or(&f->flags, set, __ATOMIC_RELAXED);
	if (clear)
		__atomic_fetch_and(&f->flags, ~clear, __ATOMIC_RELAXED);
	return 0;
}

/*
 * dup: @to gets @from's entry (or none). Returns the state copied, or
 * -EBADF/-ERANGE when @to is outside the table.
 */
int san_fd_copy(int from, int to)
{
	struct san_fd *src = san_fd_get(from);
	enum san_fd_state state;

	if (!san_fd_slot(to))
		return san_fd_slot_err(to);
	if (!src) {
		san_fd_clear(to);
		return SAN_FD_UNTRACKED;
	}
	state = san_fd_state(src);
	/* TXMUTE names one number of a connection (the one its sock translates), not a dup */
	san_fd_track(to, state, san_fd_flags(src) & ~SAN_FDF_TXMUTE);
	return (int)state;
}

/*
 * Forget @fd; returns the state it had. An untracked slot is only read, never
 * written, so clearing the slots of all the fds a program creates does not
 * dirty a page per 512 fd numbers.
 */
enum san_fd_state san_fd_clear(int fd)
{
	struct san_fd *f = san_fd_slot(fd);
	enum san_fd_state old;

	if (!f || __atomic_load_n(&f->state, __ATOMIC_RELAXED) == SAN_FD_UNTRACKED)
		return SAN_FD_UNTRACKED;
	/* The caller may go on to close the fd: in a vfork child, only its own copy. */
	if (unlikely(!san_fdtable_owned()))
		return SAN_FD_UNTRACKED;
	old = __atomic_exchange_n(&f->state, SAN_FD_UNTRACKED, __ATOMIC_ACQ_REL);
	__atomic_store_n(&f->flags, 0, __ATOMIC_RELAXED);
	san_fd_count_switched(old, SAN_FD_UNTRACKED);
	return old;
}

/* close_range()/closefrom(): only up to the highest fd ever tracked. */
void san_fd_clear_range(unsigned int first, unsigned int last)
{
	unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);
	unsigned int fd;

	if (hw == 0 || first >= hw || !san_fdtable_owned())
		return;
	if (last >= hw)
		last = hw - 1;
	for (fd = first; fd <= last; fd++)
		san_fd_clear((int)fd);
}
