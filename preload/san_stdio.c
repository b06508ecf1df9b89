/*
 * preload — the stdio bridge: stdin, stdout and stderr of a process handed a connection on 0, 1
 * or 2 at exec (inetd's shape) move their bytes through the wrappers.
 *
 * glibc's stdio makes its read(2) and write(2) inside libc, where no wrapper sees them. Before a
 * connection switches, the counts check catches that and keeps it on TCP; but a program may talk
 * through read(2)/write(2) first and through stdio only later (git's upload-pack with protocol
 * v2: its ls-refs reply is an fflush(stdout)), after the switch, when the number is the
 * notification socket: those bytes never reached the peer and the exchange hung. So, at load,
 * each of the three standard streams whose number is an adopted connection is replaced by an
 * fopencookie() stream whose read, write and close are the same calls on the same number, made
 * through the wrappers: the program's stdio moves the same bytes at the same moments, only
 * visibly. It buffers as glibc's stream would (bridge_buffering); its fd is set, so fileno()
 * answers as before; setvbuf() works on it as on any stream. The library's exit handler flushes
 * it before it ends a connection (san_core_stdio_flush).
 *
 * fclose() and freopen() of a bridged stream give the program glibc's own stream back, on the
 * same number, and act on that one (san_stdio_unbridge): glibc never frees its standard streams
 * (a program may printf after fclose(stdout) and get EBADF), and its freopen() cannot take a
 * cookie stream. What differs, and docs/behaviour.md says: a bridged stream has no wide
 * orientation (fwprintf fails), and a FILE * taken before our constructor ran would still be
 * glibc's. SANSWITCH_STDIO=0 leaves the streams alone.
 */
#include "preload/san_preload.h"

#include <stdint.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/san_config.h"

/* glibc's flag for an unbuffered stream (libio.h; the FILE layout is ABI): no getter names it */
#define SAN_IO_UNBUFFERED 0x0002
#define SAN_IO_NO_READS 0x0004
#define SAN_IO_NO_WRITES 0x0008
#define SAN_IO_IN_BACKUP 0x0100

/*
 * One standard stream: the number, glibc's own stream (given back at fclose or freopen), ours
 * while it is bridged. A cookie holds its slot; a slot's fd is -1 once the program closed it, and
 * the cookie stream is then kept, never freed (a program may still hold it), and moves nothing.
 */
struct bridge {
	int fd;
	FILE *glibc;
	FILE *ours;
	bool forward; /* freopen()ed: ours, kept by the program, moves through glibc's (unbuffered) */
	bool exit_skip;	      /* the exit's flush found another thread in it (bridge_exit_flush) */
	pthread_t exit_thread; /* ... the thread that exits */
};

static struct bridge slots[3] = { { .fd = -1 }, { .fd = -1 }, { .fd = -1 } };
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static int bridge_fd(void *cookie)
{
	return __atomic_load_n(&((struct bridge *)cookie)->fd, __ATOMIC_ACQUIRE);
}

/*
 * After freopen(), a pointer the program kept to ours is, for glibc, the same FILE as stdin or
 * stdout, now on the new file: our stream, unbuffered from then on, moves its bytes through
 * glibc's (std::cout of a GCC 12 program holds ours: its lines go to the file, as glibc's).
 */
static ssize_t forward_read(struct bridge *b, char *buf, size_t len)
{
	size_t n = fread(buf, 1, len, b->glibc);

	return n == 0 && ferror(b->glibc) ? -1 : (ssize_t)n;
}

static ssize_t bridge_read(void *cookie, char *buf, size_t len)
{
	int fd = bridge_fd(cookie);

	if (fd < 0 && __atomic_load_n(&((struct bridge *)cookie)->forward, __ATOMIC_ACQUIRE))
		return forward_read(cookie, buf, len);
	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	return read(fd, buf, len);
}

/*
 * All of it, as glibc's own file write loops over short writes (a cookie stream takes a short
 * count for an error). On an error the count written, 0 if none: never -1 (fopencookie(3): a
 * write must not return a negative value; libio takes the count as unsigned, and -1 made an
 * fwrite on an unbuffered stream answer all of it written).
 */
static ssize_t bridge_write(void *cookie, const char *buf, size_t len)
{
	int fd = bridge_fd(cookie);
	size_t done = 0;

	if (fd < 0 && __atomic_load_n(&((struct bridge *)cookie)->forward, __ATOMIC_ACQUIRE))
		return (ssize_t)fwrite(buf, 1, len, ((struct bridge *)cookie)->glibc);
	if (fd < 0) {
		errno = EBADF;
		return 0;
	}
	if (__atomic_load_n(&((struct bridge *)cookie)->exit_skip, __ATOMIC_ACQUIRE) &&
	    pthread_equal(pthread_self(), ((struct bridge *)cookie)->exit_thread)) {
		errno = EBADF;
		return 0; /* (see bridge_exit_flush) */
	}
	while (done < len) {
		ssize_t w = write(fd, buf + done, len - done);

		if (w <= 0)
			break;
		done += (size_t)w;
	}
	return (ssize_t)done;
}

/* As glibc's file streams: the number's own lseek (ESPIPE on a socket). */
static int bridge_seek(void *cookie, off64_t *off, int whence)
{
	int fd = bridge_fd(cookie);
	off64_t r;

	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	r = lseek64(fd, *off, whence);
	if (r < 0)
		return -1;
	*off = r;
	return 0;
}

/* Our streams are never fclose()d by glibc (san_stdio_unbridge), so this only says so. */
static int bridge_close(void *cookie)
{
	return 0;
}

static struct bridge *slot_of(FILE *fp)
{
	for (int i = 0; fp && i < 3; i++)
		if (__atomic_load_n(&slots[i].ours, __ATOMIC_ACQUIRE) == fp)
			return &slots[i];
	return NULL;
}

bool san_stdio_bridged(FILE *fp)
{
	return slot_of(fp) != NULL;
}

/*
 * fclose() or freopen() of one of our streams: flush it (its bytes go out through the wrappers,
 * before the number changes), give the program glibc's own stream back (stdin, stdout or stderr
 * pointed at ours: now at glibc's, on the same number), and return glibc's, on which the caller
 * does what the program asked. Ours stays allocated and moves nothing from now on (reopen: for
 * freopen(), it moves its bytes through glibc's, whose FILE a kept pointer means). A stream of
 * ours closed before (the program kept its pointer): glibc's, already given back; ours moves
 * nothing. *flushed: the flush's result (0, or EOF).
 */
FILE *san_stdio_unbridge(FILE *fp, int *flushed, bool reopen)
{
	FILE **const std[3] = { &stdin, &stdout, &stderr };
	struct bridge *b = slot_of(fp);
	FILE *glibc;

	*flushed = 0;
	if (!b)
		return fp;
	flockfile(fp);
	if (__atomic_load_n(&b->fd, __ATOMIC_ACQUIRE) >= 0)
		*flushed = fflush_unlocked(fp);
	/* (unbuffered while its number is still valid: the sync of a read-ahead seeks) */
	if (reopen && __atomic_load_n(&b->fd, __ATOMIC_ACQUIRE) >= 0)
		(void)setvbuf(fp, NULL, _IONBF, 0);
	pthread_mutex_lock(&slots_lock);
	glibc = b->glibc;
	if (b->fd >= 0) {
		__atomic_store_n(&b->forward, reopen, __ATOMIC_RELEASE);
		__atomic_store_n(&b->fd, -1, __ATOMIC_RELEASE);
		if (*std[b - slots] == fp)
			*std[b - slots] = glibc;
	}
	pthread_mutex_unlock(&slots_lock);
	if (__atomic_load_n(&b->forward, __ATOMIC_ACQUIRE)) {
		funlockfile(fp);
		return glibc;
	}
	fp->_fileno = -1; /* (fileno: EBADF; our fclose wrapper then leaves the number alone) */
	/*
	 * As glibc's closed stream: a write or read through a pointer the program kept fails at
	 * once with EBADF (libio's overflow and underflow check these flags), not into the buffer
	 * with the error only at a flush; and nothing read ahead is handed out any more.
	 */
	fp->_flags |= SAN_IO_NO_READS | SAN_IO_NO_WRITES;
	fp->_IO_read_ptr = fp->_IO_read_end;
	fp->_IO_write_end = fp->_IO_write_ptr = fp->_IO_write_base;
	funlockfile(fp);
	return glibc;
}

/* At exit, before the connections end: each bridged stream's bytes, if no thread holds it. */
static void bridge_exit_flush(void)
{
	for (int i = 0; i < 3; i++) {
		FILE *fp = __atomic_load_n(&slots[i].ours, __ATOMIC_ACQUIRE);

		/*
		 * A stream another thread holds (blocked in a write the peer does not read, or in
		 * a read) is skipped: waiting would hang the exit.
		 */
		if (!fp || bridge_fd(&slots[i]) < 0)
			continue;
		if (ftrylockfile(fp)) {
			/*
			 * glibc's flush after us would write that thread's buffer while the thread
			 * writes it too (ours may wait for ring space meanwhile, where the kernel's
			 * took it at once): the peer got a piece twice (4 runs in 7). The exiting
			 * thread writes nothing more there: the peer gets a prefix, as the process's
			 * end cuts the other thread's write.
			 */
			slots[i].exit_thread = pthread_self();
			__atomic_store_n(&slots[i].exit_skip, true, __ATOMIC_RELEASE);
			continue;
		}
		(void)fflush_unlocked(fp);
		funlockfile(fp);
	}
}

/*
 * Buffering as glibc's stream has it now (a constructor may have set it: stdbuf(1)'s libstdbuf
 * runs before ours) or would take at its first use: unbuffered (stderr), line, or full with a
 * buffer of the socket's st_blksize when that is below BUFSIZ (8192; a socket's is 4096), where
 * a fopencookie() stream would take BUFSIZ and a program that writes without fflush would send at
 * other moments (GNU sed, tr: 8192 bytes, not 4096). The buffer is ours, and lives as long as
 * the process (one per stream).
 */
static void bridge_buffering(FILE *fp, FILE *glibc, int fd)
{
	size_t size = glibc->_IO_buf_base ? __fbufsize(glibc) : BUFSIZ;
	struct stat st;
	char *buf;

	if (glibc->_flags & SAN_IO_UNBUFFERED) {
		(void)setvbuf(fp, NULL, _IONBF, 0);
		return;
	}
	if (!glibc->_IO_buf_base && !fstat(fd, &st) && st.st_blksize > 0 && st.st_blksize < BUFSIZ)
		size = (size_t)st.st_blksize;
	if (!size)
		size = BUFSIZ;
	/* (no memory: glibc's own choice, BUFSIZ, at the first use) */
	buf = malloc(size);
	(void)setvbuf(fp, buf, __flbf(glibc) ? _IOLBF : _IOFBF, buf ? size : 0);
}

/*
 * What a constructor that ran before ours left in glibc's stream moves into ours, where glibc
 * would have kept it: bytes written go out at the moment glibc's would (a flush here made them
 * early, and behind the wrappers: the switch then saw the connection used where it could not
 * look, and kept it on TCP); bytes read ahead are the program's next ones (they were lost). A
 * wide or pushed-back state, or read-ahead our buffer cannot hold: glibc's stream is kept for
 * that number (false) but for writes, flushed as before.
 */
static bool bridge_take_buffered(FILE *fp, FILE *glibc, int fd)
{
	size_t n;

	if (!fd) {
		n = (size_t)(glibc->_IO_read_end - glibc->_IO_read_ptr);
		if (glibc->_IO_read_ptr == NULL || !n)
			return !(glibc->_flags & SAN_IO_IN_BACKUP);
		if ((glibc->_flags & SAN_IO_IN_BACKUP) || glibc->_mode > 0 || !fp->_IO_buf_base ||
		    n > (size_t)(fp->_IO_buf_end - fp->_IO_buf_base))
			return false;
		memcpy(fp->_IO_buf_base, glibc->_IO_read_ptr, n);
		fp->_IO_read_base = fp->_IO_read_ptr = fp->_IO_buf_base;
		fp->_IO_read_end = fp->_IO_buf_base + n;
		glibc->_IO_read_ptr = glibc->_IO_read_end;
		return true;
	}
	n = (size_t)(glibc->_IO_write_ptr - glibc->_IO_write_base);
	if (glibc->_IO_write_ptr == NULL || !n)
		return true;
	if (glibc->_mode > 0) {
		(void)fflush(glibc);
		return true;
	}
	(void)fwrite_unlocked(glibc->_IO_write_base, 1, n, fp);
	glibc->_IO_write_ptr = glibc->_IO_write_base;
	return true;
}

void san_stdio_bridge(void)
{
	static const cookie_io_functions_t io = {
		.read = bridge_read,
		.write = bridge_write,
		.seek = bridge_seek,
		.close = bridge_close,
	};
	FILE **const std[3] = { &stdin, &stdout, &stderr };
	bool any = false;

	if (!san_cfg.stdio)
		return;
	for (int fd = 0; fd < 3; fd++) {
		FILE *fp;

		if (!san_managed(fd))
			continue;
		if (!(fp = fopencookie(&slots[fd], fd ? "w" : "r", io))) {
			/* (at load, only out of memory) as before the bridge: stdio before the switch
			 * keeps the connection on TCP, stdio after it does not reach the peer */
			san_warn("fd %d: no stdio bridge (%s): the program's std%s is glibc's own",
				 fd, strerror(errno), fd == 0 ? "in" : fd == 1 ? "out" : "err");
			continue;
		}
		fp->_fileno = fd; /* fileno(); the cookie's calls never use it */
		bridge_buffering(fp, *std[fd], fd);
		if (!bridge_take_buffered(fp, *std[fd], fd)) {
			/* (left unused, not fclose()d: our wrapper would end the number) */
			fp->_fileno = -1;
			san_warn("fd %d: no stdio bridge (stdin read ahead before us): glibc's own", fd);
			continue;
		}
		slots[fd].fd = fd;
		slots[fd].glibc = *std[fd];
		__atomic_store_n(&slots[fd].ours, fp, __ATOMIC_RELEASE);
		*std[fd] = fp;
		any = true;
		san_debug("fd %d: the program's std%s goes through the library (stdio bridge)", fd,
			  fd == 0 ? "in" : fd == 1 ? "out" : "err");
	}
	if (any)
		__atomic_store_n(&san_core_stdio_flush, bridge_exit_flush, __ATOMIC_RELEASE);
}
