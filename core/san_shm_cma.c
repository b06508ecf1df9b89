/* core — shm provider: process_vm_readv/writev loops, the permission probe, fault injection. */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "core/san_shm_cma.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* Positive errno to fail every call with, or 0. */
static _Atomic int san_shm_cma_fault;

void san_shm_cma_set_fault(int err)
{
	atomic_store_explicit(&san_shm_cma_fault, err < 0 ? -err : err, memory_order_relaxed);
}

typedef ssize_t (*san_shm_cma_fn)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
				  unsigned long, unsigned long);

/*
 * One loop for both directions. The kernel stops at the first page it cannot reach and
 * returns what it moved (a partial transfer) or, with nothing moved, -1: so a short count
 * just means "call again from there", and the next call reports the errno.
 *
 * Most calls pass the caller's array as it is (no copy, up to IOV_MAX elements); the remote
 * side is one iovec covering everything still to move, which the kernel clips to the local
 * total. Only after a partial transfer that stopped inside an element is that element
 * re-issued alone, trimmed, in a call of its own: rare, and it saves copying the array.
 */
static ssize_t san_shm_cma_xfer(san_shm_cma_fn fn, const struct san_shm_cma_region *r,
				const struct iovec *iov, size_t iovcnt, size_t *done)
{
	size_t want = 0, moved = 0, i = 0, off = 0;
	int fault = atomic_load_explicit(&san_shm_cma_fault, memory_order_relaxed);

	if (done)
		*done = 0;
	if (fault)
		return -fault;
	for (size_t k = 0; k < iovcnt && want < r->len; k++)
		want += iov[k].iov_len;
	if (want > r->len)
		want = r->len;

	while (moved < want) {
		struct iovec one, rv;
		const struct iovec *lv;
		unsigned long cnt;
		ssize_t n;

		/* Skip empty elements so that a call that moves nothing is an error, not a loop. */
		while (i < iovcnt && iov[i].iov_len == off) {
			i++;
			off = 0;
		}
		if (i == iovcnt)
			return -EFAULT; /* the iovecs changed under us: not a loop either */
		if (off) {
			one.iov_base = (char *)iov[i].iov_base + off;
			one.iov_len = iov[i].iov_len - off;
			lv = &one;
			cnt = 1;
		} else {
			lv = &iov[i];
			cnt = iovcnt - i < IOV_MAX ? iovcnt - i : IOV_MAX;
		}
		rv.iov_base = (void *)(uintptr_t)(r->addr + moved);
		rv.iov_len = want - moved;
		n = fn(r->pid, lv, cnt, &rv, 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EFAULT; /* no progress, no error: never seen, never loop on it */
		moved += (size_t)n;
		if (done)
			*done = moved;
		/* Advance (i, off) by n bytes. */
		for (size_t left = (size_t)n; left;) {
			size_t room = iov[i].iov_len - off;

			if (left < room) {
				off += left;
				break;
			}
			left -= room;
			i++;
			off = 0;
		}
	}
	return (ssize_t)moved;
}

ssize_t san_shm_cma_read(const struct san_shm_cma_region *src, const struct iovec *iov,
			 size_t iovcnt, size_t *done)
{
	return san_shm_cma_xfer(process_vm_readv, src, iov, iovcnt, done);
}

ssize_t san_shm_cma_write(const struct san_shm_cma_region *dst, const struct iovec *iov,
			  size_t iovcnt, size_t *done)
{
	return san_shm_cma_xfer(process_vm_writev, dst, iov, iovcnt, done);
}

int san_shm_cma_probe(pid_t pid, uint64_t remote_addr)
{
	struct san_shm_cma_region r = { .pid = pid, .addr = remote_addr, .len = 1 };
	unsigned char byte;
	struct iovec v = { .iov_base = &byte, .iov_len = 1 };
	ssize_t n = san_shm_cma_read(&r, &v, 1, NULL);

	return n < 0 ? (int)n : 0;
}
