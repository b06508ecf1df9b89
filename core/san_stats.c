/* core — per-process statistics: counters in a shared file sanstat can read, a line at exit. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/san_log.h"
#include "core/san_core.h"
#include "core/san_forked.h"
#include "core/san_stats.h"
#include "core/san_stats_conn.h"
#include "core/san_sock.h"
#include "core/san_sys.h"


/*
 * The process's statistics. The counters live in *f: the mapped file, or san_stats_priv when
 * there is none (SANSWITCH_STATS=0 never gets this far; creation failed; or the process is
 * exiting). f stays NULL until the first tracked socket, so a program that never opens TCP
 * creates no file (and prints no line); it is published once with a release store and never
 * changes afterwards (except in a fork child, which has one thread). An image that an exec
 * handed the file to takes it at load, before any thread (san_stats_take_over).
 */
static struct {
	pthread_mutex_t lock; /* creation of the file; the close of a dup'ed fd */
	struct san_stats_file *f;
	bool mapped;	  /* f is the file's mapping */
	bool no_file;	  /* exiting: never create the file now */
	bool shown;	  /* a line was printed at an exec that failed (see san_stats_print) */
	bool env_preload; /* LD_PRELOAD named the library when it was loaded */
	int exited;	  /* the exit hook ran (atomic) */
	pid_t pid;	  /* the process this state belongs to (0: not initialised) */
	char dir[200];	  /* where the file goes; "" means SAN_STATS_DIR */
	char path[256];	  /* the file, "" when this process has none */
} san_st = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct san_stats_file san_stats_priv;
/* What the lines printed so far have shown (only once san_st.shown). */
static struct san_stats_file san_stats_shown;

static const char *san_stats_dir(void)
{
	return *san_st.dir ? san_st.dir : SAN_STATS_DIR;
}

/* ---------------------------------------------------------------- the file */

static long san_stats_sys_close(int fd)
{
	/* Not close(): that is our own wrapper, which would look the fd up for nothing. */
	return syscall(SYS_close, fd);
}

/* Up to @size - 1 bytes of the file at @path, NUL-terminated; the length, or -errno. */
static long san_stats_slurp(const char *path, char *buf, size_t size)
{
	long n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = syscall(SYS_read, fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	san_stats_sys_close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* comm and start time of process @pid ("self" for 0), best effort: zero if /proc says nothing. */
static void san_stats_proc(pid_t pid, char comm[16], uint64_t *start_ticks)
{
	char path[64], buf[1024];

	memset(comm, 0, 16);
	*start_ticks = 0;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	if (san_stats_slurp(path, buf, sizeof(buf)) <= 0)
		return;
	if (san_stats_parse_procstat(buf, comm, start_ticks))
		*start_ticks = 0;
}

static uint64_t san_stats_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) ? 0 : (uint64_t)st.st_ino;
}

static void san_stats_fill_hdr(struct san_stats_file *f, pid_t pid)
{
	struct san_stats_hdr *h = &f->hdr;
	struct timespec ts;

	h->version = SAN_STATS_VERSION;
	h->hdr_len = sizeof(*h);
	h->nr_counters = SAN_STATS_COUNTERS;
	h->nr_reasons = SAN_FB_SLOTS;
	h->nr_conns = SAN_STATS_CONNS;
	h->conn_len = sizeof(struct san_stats_conn);
	h->conn_off = offsetof(struct san_stats_file, conns);
	h->pid = pid;
	h->pidns = san_stats_pidns();
	san_stats_proc(0, h->comm, &h->start_ticks);
	if (!clock_gettime(CLOCK_REALTIME, &ts))
		h->created_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	/* Last: a reader that sees the magic sees a complete header. */
	__atomic_store_n(&h->magic, SAN_STATS_MAGIC, __ATOMIC_RELEASE);
}

/*
 * "<dir>/sanswitch.<pid>". Put together by hand: every preloaded process makes this name at
 * load (san_stats_take_over), and snprintf's formatter was three pages of libc text that a
 * program printing nothing, /bin/true, faulted in for it.
 */
static int san_stats_path_for(char *buf, size_t size, const char *dir, pid_t pid)
{
	static const char stem[] = "/sanswitch.";
	char digits[12];
	size_t dlen = strlen(dir), ndig = 0;
	unsigned int v = (unsigned int)pid; /* (a pid is positive) */
	char *p;

	do {
		digits[ndig++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (dlen + sizeof(stem) - 1 + ndig >= size)
		return -ENAMETOOLONG;
	p = mempcpy(buf, dir, dlen);
	p = mempcpy(p, stem, sizeof(stem) - 1);
	while (ndig)
		*p++ = digits[--ndig];
	*p = '\0';
	return 0;
}

/*
 * The name carries our pid, so a file already there is a leftover: of a process with the
 * same pid that was killed (no exit hook ran), or of our own image before a failed unlink.
 * It is replaced only if it is a plain file of ours; a stranger's file or a symlink in the
 * sticky /dev/shm is refused (O_EXCL never follows one), and the process keeps its counters
 * private.
 */
static int san_stats_open_excl(const char *path)
{
	int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	struct stat st;
	int fd;

	fd = open(path, flags, 0600);
	if (fd >= 0 || errno != EEXIST)
		return fd >= 0 ? fd : -errno;
	if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return -EEXIST;
	if (unlink(path) && errno != ENOENT)
		return -errno;
	fd = open(path, flags, 0600);
	return fd >= 0 ? fd : -errno;
}

int san_stats_file_create(const char *dir, pid_t pid, struct san_stats_file **out)
{
	char path[sizeof(san_st.path)];
	void *p;
	int err, fd;

	err = san_stats_path_for(path, sizeof(path), dir, pid);
	if (err)
		return err;
	fd = san_stats_open_excl(path);
	if (fd < 0)
		return fd;
	if (ftruncate(fd, sizeof(struct san_stats_file))) {
		err = -errno;
		goto fail;
	}
	p = mmap(NULL, sizeof(struct san_stats_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	san_stats_sys_close(fd);
	san_stats_fill_hdr(p, pid);
	*out = p;
	return 0;
fail:
	san_stats_sys_close(fd);
	unlink(path);
	return err;
}

void san_stats_file_unmap(struct san_stats_file *f)
{
	munmap(f, sizeof(*f));
}

/*
 * The file an exec handed over (san_stats_before_exec): ours only if it is a plain file of our
 * user, of this very layout, flagged SAN_STATS_F_EXEC and not exited, and names this process:
 * our pid in our pid namespace, and our start time, which an exec keeps (a leftover of a dead
 * process that had our pid has another). The flag is cleared and the name updated to the new
 * program's; the counters go on. -ENOENT when there is no file, -ESTALE for one not ours.
 */
int san_stats_file_adopt(const char *dir, pid_t pid, struct san_stats_file **out)
{
	char path[sizeof(san_st.path)], comm[16];
	struct san_stats_file *f;
	struct san_stats_hdr *h;
	uint64_t start;
	uint32_t flags;
	struct stat st;
	void *p;
	int err, fd;

	err = san_stats_path_for(path, sizeof(path), dir, pid);
	if (err)
		return err;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_size != (off_t)sizeof(struct san_stats_file)) {
		san_stats_sys_close(fd);
		return -ESTALE;
	}
	p = mmap(NULL, sizeof(struct san_stats_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = p == MAP_FAILED ? -errno : 0;
	san_stats_sys_close(fd);
	if (err)
		return err;
	f = p;
	h = &f->hdr;
	flags = __atomic_load_n(&h->flags, __ATOMIC_ACQUIRE);
	san_stats_proc(0, comm, &start);
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SAN_STATS_MAGIC ||
	    h->version != SAN_STATS_VERSION || h->hdr_len != sizeof(*h) ||
	    h->nr_counters != SAN_STATS_COUNTERS || h->nr_reasons != SAN_FB_SLOTS ||
	    h->nr_conns != SAN_STATS_CONNS || h->conn_len != sizeof(struct san_stats_conn) ||
	    h->conn_off != offsetof(struct san_stats_file, conns) || h->pid != pid || !(flags & SAN_STATS_F_EXEC) || (flags & SAN_STATS_F_EXITED) ||
	    !start || h->start_ticks != start || !h->pidns || h->pidns != san_stats_pidns()) {
		san_stats_file_unmap(f);
		return -ESTALE;
	}
	memcpy(h->comm, comm, sizeof(h->comm));
	__atomic_fetch_and(&h->flags, ~SAN_STATS_F_EXEC, __ATOMIC_RELEASE);
	*out = f;
	return 0;
}

/*
 * Is DIR/NAME the leftover of a dead process? Only a file we can read as a stats file of
 * ours, from our pid namespace (a pid in another one means nothing here: /dev/shm may be
 * shared with a container), whose pid is gone or now names a process that started at
 * another time. Anything else is left alone.
 */
static bool san_stats_stale(int dfd, const char *name, pid_t pid, uint64_t pidns, ino_t *ino)
{
	struct san_stats_hdr h;
	struct stat st;
	char comm[16];
	uint64_t start;
	long n;
	int fd;

	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return false;
	n = fstat(fd, &st) ? -1 : syscall(SYS_read, fd, &h, sizeof(h));
	san_stats_sys_close(fd);
	if (n != (long)sizeof(h) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    h.magic != SAN_STATS_MAGIC || h.version != SAN_STATS_VERSION || h.pid != pid ||
	    !pidns || h.pidns != pidns)
		return false;
	*ino = st.st_ino;
	if (kill(pid, 0) && errno == ESRCH)
		return true;
	san_stats_proc(pid, comm, &start);
	return start && h.start_ticks && start != h.start_ticks;
}

/*
 * getdents64 into a stack buffer rather than opendir(): no malloc on a path that runs inside
 * socket() and accept(), which a program may call from anywhere.
 */
int san_stats_gc(const char *dir, uint64_t pidns, pid_t self)
{
	char buf[4096];
	int removed = 0;
	int dfd;
	long n;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		long off = 0;

		while (off < n) {
			/* struct linux_dirent64: ino, off, reclen, type, name */
			unsigned short reclen;
			const char *name = buf + off + 19;
			struct stat st;
			char *end;
			ino_t ino;
			long pid;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			off += reclen;
			if (strncmp(name, "sanswitch.", 10) || name[10] < '1' || name[10] > '9')
				continue;
			pid = strtol(name + 10, &end, 10);
			if (*end || pid <= 0 || pid > INT32_MAX || pid == self)
				continue;
			if (!san_stats_stale(dfd, name, (pid_t)pid, pidns, &ino))
				continue;
			/*
			 * A new process with that pid may have replaced the file meanwhile
			 * (it removes leftovers of its own pid itself): leave a new file be.
			 */
			if (!fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) && st.st_ino == ino &&
			    !unlinkat(dfd, name, 0))
				removed++;
		}
	}
	san_stats_sys_close(dfd);
	return removed;
}

/* ---------------------------------------------------------------- the live counters */

/* Slow path of san_stats_live(): decide, once, where this process's counters live. */
static struct san_stats_file *san_stats_make(void)
{
	struct san_stats_file *f;
	int saved = errno;
	pid_t pid;
	int err;

	pthread_mutex_lock(&san_st.lock);
	f = san_st.f;
	if (f)
		goto out;
	pid = getpid();
	f = &san_stats_priv;
	if (!__atomic_load_n(&san_st.no_file, __ATOMIC_ACQUIRE)) {
		err = san_stats_file_create(san_stats_dir(), pid, &f);
		if (!err) {
			san_st.mapped = true;
			san_stats_path_for(san_st.path, sizeof(san_st.path), san_stats_dir(), pid);
			err = san_stats_gc(san_stats_dir(), f->hdr.pidns, pid);
			san_debug("stats: %s (%d leftovers of dead processes removed)", san_st.path,
				  err);
		} else {
			f = &san_stats_priv;
			san_info("stats: no file for sanstat (%s): counters kept private",
				 strerror(-err));
		}
	}
	if (f == &san_stats_priv)
		san_stats_priv.hdr.pid = pid;
	__atomic_store_n(&san_st.f, f, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&san_st.lock);
	errno = saved; /* callers run after the application's call: its errno stands */
	return f;
}

static struct san_stats_file *san_stats_live(void)
{
	struct san_stats_file *f = __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE);

	return likely(f) ? f : san_stats_make();
}

struct san_stats_file *san_stats_live_file(void)
{
	return san_stats_live();
}

/*
 * Relaxed atomic adds: sanstat reads while we count, and several threads count at once. The
 * callers are connection setup and teardown, never the read/write fast paths; an engine data
 * path should count per connection and add here when the connection ends.
 */
void san_stats_add(enum san_stat s, uint64_t n)
{
	if (!san_stats_enabled() || (unsigned int)s >= SAN_STAT_NR || !n)
		return;
	__atomic_fetch_add(&san_stats_live()->counters[s], n, __ATOMIC_RELAXED);
}

void san_stats_fallback(unsigned int reason)
{
	struct san_stats_file *f;

	if (!san_stats_enabled())
		return;
	f = san_stats_live();
	__atomic_fetch_add(&f->fallback[san_fb_slot(reason)], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&f->counters[SAN_STAT_FALLBACK], 1, __ATOMIC_RELAXED);
}

uint64_t san_stats_get(enum san_stat s)
{
	struct san_stats_file *f = __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE);

	if (!f || (unsigned int)s >= SAN_STAT_NR)
		return 0;
	return __atomic_load_n(&f->counters[s], __ATOMIC_RELAXED);
}

uint64_t san_stats_get_fallback(unsigned int reason)
{
	struct san_stats_file *f = __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE);

	return f ? __atomic_load_n(&f->fallback[san_fb_slot(reason)], __ATOMIC_RELAXED) : 0;
}

void san_stats_track(void)
{
	if (san_stats_enabled())
		san_stats_live();
}

const struct san_stats_file *san_stats_current(void)
{
	return __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE);
}

const char *san_stats_path(void)
{
	return *san_st.path ? san_st.path : NULL;
}

/* ---------------------------------------------------------------- TCP byte counts */

/* Has the struct tcp_info the kernel filled (@len bytes) got @field? */
#define SAN_TI_HAS(len, field) \
	((len) >= offsetof(struct tcp_info, field) + sizeof(((struct tcp_info *)0)->field))

void san_stats_conn_end(int fd, bool active, unsigned int reason)
{
	struct san_tcp_counts tc = { 0 };
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int saved = errno;
	uint64_t tx, rx;

	if (!san_stats_enabled())
		return;
	memset(&ti, 0, sizeof(ti));
	/*
	 * The system call, not getsockopt(): ours would hand a switched fd to the engine. It
	 * fails for an fd that is no TCP socket any more (an entry left behind by a close we
	 * could not see): nothing is counted then.
	 */
	if (SAN_SYS(SYS_getsockopt, (long)fd, (long)IPPROTO_TCP, (long)TCP_INFO, &ti, &len) < 0 ||
	    !SAN_TI_HAS(len, tcpi_bytes_received)) {
		errno = saved;
		return;
	}
	tc.state = ti.tcpi_state;
	tc.bytes_acked = ti.tcpi_bytes_acked;
	tc.bytes_received = ti.tcpi_bytes_received;
	if (SAN_TI_HAS(len, tcpi_bytes_retrans) && SAN_TI_HAS(len, tcpi_notsent_bytes)) {
		tc.have_sent = true;
		tc.bytes_sent = ti.tcpi_bytes_sent;
		tc.bytes_retrans = ti.tcpi_bytes_retrans;
		tc.notsent_bytes = ti.tcpi_notsent_bytes;
	}
	if (!san_stats_tcp_payload(&tc, active, &tx, &rx)) {
		san_debug("fd %d: connection never established: not counted", fd);
		return;
	}
	san_debug("fd %d: connection ends: tcp state %u, tx %" PRIu64 " rx %" PRIu64 " bytes", fd,
		  tc.state, tx, rx);
	san_stats_add(SAN_STAT_TCP_TX_BYTES, tx);
	san_stats_add(SAN_STAT_TCP_RX_BYTES, rx);
	if (reason)
		san_stats_fallback(reason);
}

/* ---------------------------------------------------------------- one count per connection */

/*
 * dup()ed fds share one connection, and the kernel's counters are the connection's, so it must
 * be counted once: when the process lets go of its last fd of it. An fd that never took part
 * in a dup (no SAN_FDF_DUP; the common case) is its connection's only fd and costs nothing
 * more. For the others the socket's inode (fstat) tells which tracked fds are the same
 * connection; there are few of them, and this runs on close only.
 *
 * @from: the first fd number to compare with (0 at close: any other fd keeps the connection;
 * fd + 1 at exit, where every fd is counted in one pass: only the highest fd of a connection
 * counts it).
 */
static int san_stats_other_fd(int fd, unsigned int from)
{
	unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);
	struct stat st, o;
	int saved = errno;
	int found = -1;
	unsigned int i;

	if (fstat(fd, &st))
		goto out;
	for (i = from; i < hw && found < 0; i++) {
		struct san_fd *g = san_fd_get((int)i);

		if (!g || (int)i == fd || !(san_fd_flags(g) & SAN_FDF_DUP))
			continue;
		if (!fstat((int)i, &o) && o.st_ino == st.st_ino && o.st_dev == st.st_dev)
			found = (int)i;
	}
out:
	errno = saved;
	return found;
}

static bool san_stats_shared_elsewhere(int fd, unsigned int from)
{
	return san_stats_other_fd(fd, from) >= 0;
}

/*
 * The connection's slot (san_stats_conn.c) follows it: to another of its numbers if one is
 * left (a dup), else it is free. Before the entry goes; the fd still open.
 */
static void san_stats_slot_close(int fd, const struct san_fd *f)
{
	int other;

	if ((san_fd_flags(f) & SAN_FDF_DUP) && (other = san_stats_other_fd(fd, 0)) >= 0)
		san_stats_conn_rekey(fd, other);
	else
		san_stats_conn_release(fd);
}

static bool san_stats_is_conn(enum san_fd_state s)
{
	/*
	 * Until the engine decides connections, every connected tracked socket that ends is a
	 * fallback that was never attempted. SWITCHED ones will be counted by the engine.
	 */
	return s == SAN_FD_ACTIVE || s == SAN_FD_PASSIVE || s == SAN_FD_CONN;
}

/* Which side opened it, and the fallback reason still to count at its end (0: counted). */
static void san_stats_conn_kind(const struct san_fd *f, enum san_fd_state state, bool *active,
				unsigned int *reason)
{
	uint32_t fl = san_fd_flags(f);

	*active = state == SAN_FD_ACTIVE || (state == SAN_FD_CONN && (fl & SAN_FDF_OPENED));
	*reason = state == SAN_FD_CONN && (fl & SAN_FDF_COUNTED) ? 0 : SAN_FB_NOT_ATTEMPTED;
}

enum san_fd_state san_stats_fd_close(int fd)
{
	struct san_fd *f = san_fd_get(fd);
	enum san_fd_state state, old;
	struct stat st;
	unsigned int reason;
	bool active;

	if (!f)
		return SAN_FD_UNTRACKED;
	if (unlikely(san_fd_flags(f) & SAN_FDF_STATSLOT))
		san_stats_slot_close(fd, f);
	state = san_fd_state(f);
	if (!san_stats_enabled() || !san_stats_is_conn(state))
		return san_fd_clear(fd);
	san_stats_conn_kind(f, state, &active, &reason);
	if (san_fd_flags(f) & SAN_FDF_TCP_ENDED) {
		/* its bytes were counted from the sock's own counts (san_sock_on_close) */
		if (reason)
			san_stats_fallback(reason);
		return san_fd_clear(fd);
	}
	if (unlikely(san_fd_flags(f) & SAN_FDF_FORKED) && !fstat(fd, &st) &&
	    san_forked_others_hold((uint64_t)st.st_ino) == 1)
		/* the connection goes on in another process, which counts its end */
		return san_fd_clear(fd);
	if (likely(!(san_fd_flags(f) & SAN_FDF_DUP))) {
		san_stats_conn_end(fd, active, reason);
		return san_fd_clear(fd);
	}
	/*
	 * Decide and forget under one lock: two threads closing the last two fds of a connection
	 * at once must not each see the other's entry and both leave the count to it. The
	 * counters exist before the lock is taken (their creation takes it too).
	 */
	san_stats_live();
	pthread_mutex_lock(&san_st.lock);
	if (!san_stats_shared_elsewhere(fd, 0))
		san_stats_conn_end(fd, active, reason);
	old = san_fd_clear(fd);
	pthread_mutex_unlock(&san_st.lock);
	return old;
}

/* ---------------------------------------------------------------- process life */

static void san_stats_forget(bool unlink_file)
{
	if (san_st.mapped) {
		if (unlink_file && *san_st.path)
			unlink(san_st.path);
		san_stats_file_unmap(san_st.f);
	}
	san_st.f = NULL;
	san_st.mapped = false;
	san_st.no_file = false;
	san_st.exited = 0;
	san_st.path[0] = '\0';
	san_st.shown = false;
	memset(&san_stats_priv, 0, sizeof(san_stats_priv));
	memset(&san_stats_shown, 0, sizeof(san_stats_shown));
	san_stats_conn_forget();
}

void san_stats_reset(const char *dir)
{
	san_stats_forget(true);
	snprintf(san_st.dir, sizeof(san_st.dir), "%s", dir ? dir : "");
	san_st.pid = getpid();
}

/*
 * At load: the counters the image before an exec handed over (san_stats_before_exec), if there
 * are any for this pid. Before any thread runs, and before a first tracked socket would make a
 * new file in the place of this one.
 */
bool san_stats_take_over(void)
{
	struct san_stats_file *f;

	if (!san_stats_enabled() || san_st.f ||
	    san_stats_file_adopt(san_stats_dir(), san_st.pid, &f))
		return false;
	san_st.mapped = true;
	san_stats_path_for(san_st.path, sizeof(san_st.path), san_stats_dir(), san_st.pid);
	/* the old image's connections are not ours: the inherited ones are adopted anew */
	san_stats_conn_clear_file(f);
	__atomic_store_n(&san_st.f, f, __ATOMIC_RELEASE);
	san_debug("stats: %s: the counts of the image before exec go on here", san_st.path);
	return true;
}

void san_stats_init(void)
{
	const char *preload = getenv("LD_PRELOAD");

	if (!san_stats_enabled())
		return;
	san_st.pid = getpid();
	san_st.env_preload = preload && strstr(preload, "libsanswitch");
	/*
	 * atexit() rather than a destructor: registered this early, at load, it runs after the
	 * program's own exit handlers (which may still close connections), and only in the
	 * library, never in the unit runner that links core/ too.
	 */
	if (atexit(san_stats_exit))
		san_warn("stats: atexit failed: no line at exit");
	san_stats_take_over();
}

/*
 * Only the forking thread lives on in the child, and it may have forked while another thread
 * held the lock. The parent's mapping is shared with the parent: the child must never count
 * into it nor remove it. Its own file comes, like any process's, with its first count.
 */
void san_stats_atfork_child(void)
{
	pthread_mutex_init(&san_st.lock, NULL);
	san_stats_forget(false);
	san_st.pid = getpid();
}

/*
 * The line (SANSWITCH_STATS=1 or log) of what no line of this process has shown yet: all its
 * counts, unless it printed one at an exec that then failed; then what it counted since, and no
 * line if that is nothing. On stderr (1), or where the log goes (log: SANSWITCH_LOG_FILE, else
 * stderr); never on a stderr that is tracked: it was closed and its number reused for one of the
 * program's own TCP connections, and the line must not go into the peer's byte stream
 * (san_log_stderr).
 */
static void san_stats_print(const struct san_stats_file *f)
{
	struct san_stats_file d;
	bool news = false;
	char line[4096];
	unsigned int i;
	size_t len;

	memset(&d.hdr, 0, sizeof(d.hdr));
	d.hdr.pid = san_st.pid;
	for (i = 0; i < SAN_STATS_COUNTERS; i++) {
		uint64_t v = __atomic_load_n(&f->counters[i], __ATOMIC_RELAXED);

		d.counters[i] = v - san_stats_shown.counters[i];
		san_stats_shown.counters[i] = v;
		news |= d.counters[i] != 0;
	}
	for (i = 0; i < SAN_FB_SLOTS; i++) {
		uint64_t v = __atomic_load_n(&f->fallback[i], __ATOMIC_RELAXED);

		d.fallback[i] = v - san_stats_shown.fallback[i];
		san_stats_shown.fallback[i] = v;
		news |= d.fallback[i] != 0;
	}
	if (san_st.shown && !news)
		return;
	san_st.shown = true;
	len = san_stats_format_line(line, sizeof(line), &d);
	if (san_cfg.stats == SAN_CFG_STATS_LOG)
		san_log_raw(line, len);
	else
		san_log_stderr(line, len);
}

/* The value of @name in an exec's environment, as getenv() would find it there; NULL if none. */
static const char *san_stats_envp_get(char *const envp[], const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/*
 * Will the program an exec starts with @envp take this image's counts over? It must run the
 * library (LD_PRELOAD in @envp names it; or, @preload_by_env false, the library came in some
 * other way, /etc/ld.so.preload, that the next program gets too), with counters (neither
 * SANSWITCH_DISABLE=1 nor SANSWITCH_STATS=0), and print a line at its exit if this image
 * would (@ours). Values are read as at load: unset, empty or not understood is the default.
 */
bool san_stats_exec_hands_over(char *const envp[], bool preload_by_env, enum san_cfg_stats ours)
{
	enum san_cfg_stats next = SAN_CFG_STATS_LIVE;
	bool off = false;
	const char *v;

	if (preload_by_env &&
	    (!(v = san_stats_envp_get(envp, "LD_PRELOAD")) || !strstr(v, "libsanswitch")))
		return false;
	if ((v = san_stats_envp_get(envp, "SANSWITCH_DISABLE")) &&
	    !san_config_parse_bool(v, &off) && off)
		return false;
	if ((v = san_stats_envp_get(envp, "SANSWITCH_STATS")))
		(void)san_config_parse_stats(v, &next); /* (unchanged if not understood) */
	if (next == SAN_CFG_STATS_OFF)
		return false;
	return !san_cfg_stats_line(ours) || san_cfg_stats_line(next);
}

/*
 * The new image keeps the pid. An image with counts (it tracked a TCP socket, counted a
 * connection, or took counts over itself) hands them to it if it will take them
 * (san_stats_exec_hands_over): the file is flagged and kept, the new image maps it at load
 * (san_stats_take_over), counts on, and its line at exit is the pid's only one, with these
 * counts in it. Otherwise (no file, or a program that will not count or print) the line is
 * printed now, if SANSWITCH_STATS=1, and the name freed. If the exec fails the process goes on
 * with its counters (a stale flag is harmless: the exit removes the file); a line printed here
 * is not printed again. An image without counts hands over nothing: a fork child that execs
 * before counting anything, or one that never saw TCP. vfork: the child shares our memory,
 * and its pid is not ours: it touches nothing.
 */
void san_stats_before_exec(char *const envp[])
{
	struct san_stats_file *f = __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE);

	if (!f || san_core_is_sandboxed() || !san_stats_enabled() || san_st.pid != getpid())
		return;
	if (san_st.mapped && *san_st.path &&
	    san_stats_exec_hands_over(envp, san_st.env_preload, san_cfg.stats)) {
		__atomic_fetch_or(&f->hdr.flags, SAN_STATS_F_EXEC, __ATOMIC_RELEASE);
		return;
	}
	if (san_cfg_stats_line(san_cfg.stats))
		san_stats_print(f);
	if (san_st.mapped && *san_st.path) {
		unlink(san_st.path);
		san_st.path[0] = '\0';
	}
}

/*
 * The connections still open at exit end now; each counted once (see above). Called with the
 * lock held and the counters in place, so nothing below takes the lock again.
 */
static void san_stats_count_open(void)
{
	unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);
	unsigned int i;

	for (i = 0; i < hw; i++) {
		struct san_fd *g = san_fd_get((int)i);
		enum san_fd_state s;
		unsigned int reason;
		bool active;

		if (!g || !san_stats_is_conn(s = san_fd_state(g)))
			continue;
		if ((san_fd_flags(g) & SAN_FDF_DUP) && san_stats_shared_elsewhere((int)i, i + 1))
			continue;
		if (san_fd_flags(g) & SAN_FDF_INHERITED)
			continue; /* (its parent counts it: no /proc look in an exit hook) */
		san_stats_conn_kind(g, s, &active, &reason);
		san_stats_conn_end((int)i, active, reason);
	}
}

/*
 * The lock, if it can be had within about a millisecond. The exit hook also runs from _exit(),
 * possibly in a signal handler that interrupted this very thread inside the lock: waiting
 * there would hang the exit forever.
 */
static bool san_stats_trylock(void)
{
	struct timespec ts = { 0, 10000 };
	int i;

	for (i = 0; i < 100; i++) {
		if (!pthread_mutex_trylock(&san_st.lock))
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

/*
 * At exit(), return from main, _exit() or _Exit(). A process killed by a signal runs none of
 * this: its file stays behind (sanstat tells a dead process's file by its pid and start_ticks).
 * Other threads may still run: they see the counters as they were, and the file goes away
 * under them harmlessly.
 */
void san_stats_exit(void)
{
	struct san_stats_file *f;
	bool tracked;

	if (san_core_is_sandboxed())
		return; /* (san_core_sandboxed: no system call the filter may refuse) */
	if (!san_stats_enabled() || san_st.pid != getpid() ||
	    __atomic_exchange_n(&san_st.exited, 1, __ATOMIC_ACQ_REL))
		return;
	/* From here a first count goes to private memory: no file made just to be removed. */
	__atomic_store_n(&san_st.no_file, true, __ATOMIC_RELEASE);
	/*
	 * A line only from a process that had to do with TCP: it has counters (it made, accepted
	 * or was handed a TCP socket, counted a connection, or took over the counts of the image
	 * before its exec), or its fd table ever held a TCP socket (a fork child's holds what its
	 * parent's held). Nothing else can have been counted: the rest print nothing.
	 */
	tracked = __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE) ||
		  __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);
	if (san_cfg_stats_line(san_cfg.stats) && tracked) {
		/* Only the line needs the connections still open: a file about to go does not. */
		if (san_stats_trylock()) {
			if (!san_st.f) {
				san_stats_priv.hdr.pid = san_st.pid;
				__atomic_store_n(&san_st.f, &san_stats_priv, __ATOMIC_RELEASE);
			}
			san_sock_stats_exit();
			san_stats_count_open();
			pthread_mutex_unlock(&san_st.lock);
		}
		f = __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE);
		if (!f) {
			f = &san_stats_priv;
			f->hdr.pid = san_st.pid;
		}
		san_stats_print(f);
	}
	f = __atomic_load_n(&san_st.f, __ATOMIC_ACQUIRE);
	if (f && san_st.mapped) {
		__atomic_fetch_or(&f->hdr.flags, SAN_STATS_F_EXITED, __ATOMIC_RELEASE);
		if (*san_st.path)
			unlink(san_st.path);
	}
}
