/* core — system calls made without passing through our own wrappers, as 0/-errno. */
#ifndef SAN_SYS_H
#define SAN_SYS_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The engine must not re-enter the interposed libc names (they would look the
 * fd up in the table and route it back to the engine), and must leave the
 * application's errno alone: every call here returns the result or -errno.
 *
 * On x86-64 and AArch64 the call is the kernel's own instruction, inline: these
 * calls are on every data call of a candidate (a short connection makes about ten at
 * each end), and syscall(3) is interposed by us (preload/san_fd.c: libuv's raw
 * closes), so going through it cost a wrapper's argument copy and checks, libc's
 * errno and our save and restore of it, each time. Elsewhere, syscall(3).
 */
static inline long san_sys(long r)
{
	return r < 0 ? -(long)errno : r;
}

#if defined(__x86_64__)
static inline long san_sys_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r; /* the kernel's -4095..-1 are -errno, as san_sys() gives */
}
#elif defined(__aarch64__)
static inline long san_sys_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a1;
	register long x1 __asm__("x1") = a2;
	register long x2 __asm__("x2") = a3;
	register long x3 __asm__("x3") = a4;
	register long x4 __asm__("x4") = a5;
	register long x5 __asm__("x5") = a6;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}
#else
static inline long san_sys_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	int e = errno;
	long r = san_sys(syscall(nr, a1, a2, a3, a4, a5, a6));

	errno = e;
	return r;
}
#endif

/* SAN_SYS(nr, args...): up to six arguments, each passed as a long (pointers too). */
#define SAN_SYS_ARGS_(nr, a1, a2, a3, a4, a5, a6, ...)                                      \
	san_sys_call((long)(nr), (long)(a1), (long)(a2), (long)(a3), (long)(a4), (long)(a5), \
		     (long)(a6))
#define SAN_SYS(...) SAN_SYS_ARGS_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)

static inline long san_sys_sendmsg(int fd, const struct msghdr *m, int flags)
{
	return SAN_SYS(SYS_sendmsg, (long)fd, m, (long)flags);
}

static inline long san_sys_recvmsg(int fd, struct msghdr *m, int flags)
{
	return SAN_SYS(SYS_recvmsg, (long)fd, m, (long)flags);
}

static inline long san_sys_send(int fd, const void *b, size_t n, int flags)
{
	return SAN_SYS(SYS_sendto, (long)fd, b, (long)n, (long)flags, NULL, 0L);
}

static inline long san_sys_recv(int fd, void *b, size_t n, int flags)
{
	return SAN_SYS(SYS_recvfrom, (long)fd, b, (long)n, (long)flags, NULL, NULL);
}

/*
 * A send or receive of a msghdr: one buffer with no address and no control data goes as
 * sendto/recvfrom, whose kernel side does not copy the header and its iovec in (nor msg_flags
 * out): about 0.3 us a call less on the development VM (a loopback ping-pong of 10-byte
 * messages, thread CPU time: 11.1 against 11.7 us a send and receive, three runs alike).
 * msg_flags then reads 0, as a TCP socket's recvmsg leaves it but for MSG_OOB (which goes as
 * recvmsg, as MSG_ERRQUEUE does).
 */
static inline long san_sys_io(int fd, struct msghdr *m, int flags, bool send)
{
	long r;

	if (m->msg_iovlen != 1 || m->msg_name || m->msg_control || m->msg_controllen ||
	    (flags & (MSG_OOB | MSG_ERRQUEUE)))
		return send ? san_sys_sendmsg(fd, m, flags) : san_sys_recvmsg(fd, m, flags);
	if (send)
		return san_sys_send(fd, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len, flags);
	r = san_sys_recv(fd, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len, flags);
	if (r >= 0)
		m->msg_flags = 0;
	return r;
}

/* Up to n messages in one call (MSG_DONTWAIT: those already queued); their count. */
static inline long san_sys_recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	return SAN_SYS(SYS_recvmmsg, (long)fd, v, (long)n, (long)flags, NULL);
}

static inline int san_sys_poll(struct pollfd *p, nfds_t n, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };

	return (int)SAN_SYS(SYS_ppoll, p, (long)n, timeout_ms < 0 ? NULL : &ts, NULL, 0L);
}

static inline int san_sys_close(int fd)
{
	return (int)SAN_SYS(SYS_close, (long)fd);
}

static inline int san_sys_fcntl(int fd, int cmd, long arg)
{
	return (int)SAN_SYS(SYS_fcntl, (long)fd, (long)cmd, arg);
}

static inline int san_sys_dup3(int from, int to, int flags)
{
	return (int)SAN_SYS(SYS_dup3, (long)from, (long)to, (long)flags);
}

static inline int san_sys_epoll_ctl(int epfd, int op, int fd, void *ev)
{
	return (int)SAN_SYS(SYS_epoll_ctl, (long)epfd, (long)op, (long)fd, ev);
}

static inline int san_sys_socketpair(int domain, int type, int proto, int sv[2])
{
	return (int)SAN_SYS(SYS_socketpair, (long)domain, (long)type, (long)proto, sv);
}

static inline int san_sys_setsockopt_int(int fd, int level, int opt, int val)
{
	return (int)SAN_SYS(SYS_setsockopt, (long)fd, (long)level, (long)opt, &val,
			    (long)sizeof(val));
}

/* An int socket option's value, or -1 when it cannot be read. */
static inline int san_sys_getsockopt_int(int fd, int level, int opt)
{
	int v = -1;
	socklen_t l = sizeof(v);

	return SAN_SYS(SYS_getsockopt, (long)fd, (long)level, (long)opt, &v, &l) < 0 ? -1 : v;
}

static inline int san_sys_shutdown(int fd, int how)
{
	return (int)SAN_SYS(SYS_shutdown, (long)fd, (long)how);
}

/* Bytes waiting in a socket's receive queue (SIOCINQ, as FIONREAD), or -errno. */
static inline int san_sys_inq(int fd)
{
	int n = 0;
	long r = SAN_SYS(SYS_ioctl, (long)fd, (long)FIONREAD, &n);

	return r < 0 ? (int)r : n;
}

#endif /* SAN_SYS_H */
