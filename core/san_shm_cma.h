/* core — shm provider: bulk copies between processes with process_vm_readv/writev (CMA). */
#ifndef SAN_SHM_CMA_H
#define SAN_SHM_CMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/*
 * The shm provider's "RDMA read" (process_vm_readv from the sender's advertised buffer) and
 * "RDMA write" (process_vm_writev into the receiver's granted buffer). One system call costs
 * about 2.4 us here whatever its size, so every transfer is one call with the whole local
 * iovec array (up to IOV_MAX elements per call) against one remote range; more calls happen
 * only for more than IOV_MAX elements or a partial transfer.
 *
 * Permission is the kernel's ptrace-attach check: same uid, target dumpable, and under Yama
 * ptrace_scope >= 1 a prctl(PR_SET_PTRACER, peer) by the target. Hence the probe at handshake:
 * if it fails, the connection moves bulk data by copying through the ring instead.
 *
 * These functions check nothing about the remote range: whether a peer may touch it (cookie,
 * registration) is the engine's decision. The kernel checks the rest and fails cleanly (never
 * a signal): -EFAULT for an unmapped or protected address on either side, -ESRCH for a pid
 * that no longer exists, -EPERM for a peer we may not attach to, -ENOMEM when the kernel could
 * not pin pages, -ENOSYS on a kernel without CMA.
 */

/* A range in another process. */
struct san_shm_cma_region {
	pid_t pid;     /* the peer process */
	uint64_t addr; /* first byte, in the peer's address space */
	uint64_t len;  /* bytes */
};

/*
 * Copy min(src->len, bytes in iov) bytes from the peer's range into the local iovec array
 * (any iovcnt, zero-length elements allowed), looping over partial transfers. Returns the
 * bytes copied (all of them), or -errno; then *done (if not NULL) holds the bytes copied
 * before the failure, a valid prefix.
 */
ssize_t san_shm_cma_read(const struct san_shm_cma_region *src, const struct iovec *iov,
			 size_t iovcnt, size_t *done);

/* The same in the other direction: from the local iovec array into the peer's range. */
ssize_t san_shm_cma_write(const struct san_shm_cma_region *dst, const struct iovec *iov,
			  size_t iovcnt, size_t *done);

/*
 * May this process read the peer's memory? Reads 1 byte at remote_addr (an address the peer
 * says it allows). 0, or -errno as above (-EPERM: not allowed; use the copy path).
 */
int san_shm_cma_probe(pid_t pid, uint64_t remote_addr);

/*
 * Fault injection for tests (the engine maps SANSWITCH_FAULT=cma_fail here): with err > 0
 * (EPERM, ENOMEM, ...) every read, write and probe fails with -err before moving a byte;
 * 0 turns it off. Process-wide, thread-safe.
 */
void san_shm_cma_set_fault(int err);

#endif /* SAN_SHM_CMA_H */
