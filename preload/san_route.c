/* preload — the data calls of managed fds, in the one shape core/ takes (an iovec array). */
#include "preload/san_preload.h"
#include "core/san_cpuload.h"

#include <time.h>

ssize_t san_route_send(int fd, const struct iovec *iov, size_t cnt, int flags)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = cnt };

	return san_sock_sendmsg(fd, &m, flags);
}

ssize_t san_route_recv(int fd, const struct iovec *iov, size_t cnt, int flags, int *msg_flags)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = cnt };
	ssize_t r = san_sock_recvmsg(fd, &m, flags);

	if (msg_flags)
		*msg_flags = m.msg_flags;
	return r;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A wait that may sleep, while switched connections exist, first polls without sleeping
 * for SANSWITCH_SPIN_US: a peer on the same host answers within microseconds, and waking
 * from a kernel sleep costs more than that. Returns the end of the spin (0: no spin).
 */
uint64_t san_route_spin_until(int timeout_ms)
{
	unsigned int us = san_sock_spin_us();
	uint64_t now;

	if (!us || timeout_ms == 0)
		return 0;
	now = mono_ns();
	if (san_cpuload_crowded(now))
		return 0; /* every CPU taken: the spin would take the peer's time (san_cpuload.h) */
	return now + (uint64_t)us * 1000u;
}

/* Still spinning? A spin that runs out is reported: the next ones get shorter. */
bool san_route_spinning(uint64_t until)
{
	if (!until)
		return false;
	san_prov_spin(); /* verbs: its arrivals reach X only when someone polls the CQ */
	if (mono_ns() < until)
		return true;
	san_sock_spin_result(false);
	return false;
}

/*
 * The spin ended with result r after rounds calls. It counts as a spin that paid off only if
 * it did spin (something was ready on the first call, or a call failed: that says nothing
 * about waiting for the peer) and found something.
 */
void san_route_spin_found(uint64_t until, int rounds, int r)
{
	if (until && rounds > 1 && r > 0)
		san_sock_spin_result(true);
}
