/*
 * tests/tools/sansquat — a process of another user that tries to take over connections it does
 * not own through the shm side channel (docs/protocol.md §9.3; tests/e2e/t_shape_users.sh).
 *
 *   sansquat listen ADDR PORT STOPFILE
 *       Bind the side-channel name a connector to ADDR:PORT tries first (the exact address's:
 *       no server takes it when it listens on a wildcard), print "sansquat: listening", and
 *       until STOPFILE exists (60 s at most) answer every PROPOSE with an ACCEPT as a
 *       switching server would. Then print
 *         "sansquat: proposes=P accepts=A switches=S aborts=N abort_reason=R changed=C"
 *       S: SWITCH messages received (a connector that committed to us: must be 0); N and R:
 *       ABORTs and the last one's reason (3: CREDENTIALS); C: proposals whose memfd changed
 *       after it came (a connector that wrote into them: must be 0): the rings against a copy
 *       taken before the ACCEPT went out, the bulk areas, zeros when they came, against zeros.
 *   sansquat propose SRC_ADDR SRC_PORT DST_ADDR DST_PORT
 *       Send a forged PROPOSE naming the TCP connection SRC -> DST (someone else's) to the
 *       side channel of the server at DST, with valid rings, and print what came back:
 *         "sansquat: answer REJECT reason=R" or "sansquat: answer ACCEPT" or
 *         "sansquat: answer none (ERR)".
 * Exit status 0 when it could do its part (the verdict is the test's), 2 on a usage or setup
 * error. Linked with the engine's side-channel and message code: it speaks the protocol exactly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/san_shm_ring.h"
#include "core/san_sidechan.h"
#include "proto/san_msg.h"
#include "proto/san_upgrade.h"

/* The shm parameters, as core/san_up.c lays them out (host order, same host). */
struct shm_params {
	uint32_t pid;
	int32_t fd_hint;
	uint64_t ring_size;
	uint64_t bulk_size;
};

#define RING_SIZE (512u * 1024u)
#define BULK_SIZE (2u * 1024u * 1024u)
#define MAX_PROPOSALS 256

static void usage(void)
{
	fprintf(stderr, "usage: sansquat listen ADDR PORT STOPFILE\n"
			"       sansquat propose SRC_ADDR SRC_PORT DST_ADDR DST_PORT\n");
	exit(2);
}

static void die(const char *what, int err)
{
	fprintf(stderr, "sansquat: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(2);
}

static void addr_of(const char *ip, const char *port, struct san_addr *a)
{
	struct in_addr v4;

	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, ip, &v4) == 1) {
		a->addr[10] = a->addr[11] = 0xff;
		memcpy(a->addr + 12, &v4, 4);
	} else if (inet_pton(AF_INET6, ip, a->addr) != 1) {
		usage();
	}
	a->port = (uint16_t)atoi(port);
	if (!a->port)
		usage();
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- listen ------------------------------------------------------------------------------- */

struct proposal {
	int side;      /* the connector's side channel, or -1 once it closed */
	int memfd;     /* the rings and areas it passed */
	void *copy;    /* the rings' bytes when they came (copied before we answer: ~1 MB) */
	size_t rings;  /* bytes of both rings */
	size_t len;    /* the whole file */
};

/* Bytes of the two rings at the start of the memfd (core/san_up.c's layout). */
static size_t rings_len(void)
{
	return 2 * san_shm_ring_bytes(RING_SIZE);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void take_proposal(struct proposal *p, struct san_side_rx *rx, int side, int *accepts)
{
	struct san_msg m = { .type = SAN_T_ACCEPT };
	struct shm_params mine = { .pid = (uint32_t)getpid(), .fd_hint = -1 };
	int pair[2];
	off_t len = lseek(rx->fd, 0, SEEK_END);
	void *map;

	p->side = side;
	p->memfd = rx->fd;
	rx->fd = -1;
	p->len = len > 0 ? (size_t)len : 0;
	p->rings = rings_len();
	p->copy = NULL;
	if (p->len >= p->rings) {
		map = mmap(NULL, p->len, PROT_READ, MAP_SHARED, p->memfd, 0);
		if (map != MAP_FAILED) {
			/* the areas after the rings must be untouched (zeros) already */
			p->copy = all_zero((uint8_t *)map + p->rings, p->len - p->rings) ?
					  malloc(p->rings) :
					  NULL;
			if (p->copy)
				memcpy(p->copy, map, p->rings);
			munmap(map, p->len);
		}
	}
	/* ACCEPT as a switching server would: our doorbell socket, our pid, our caps. */
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) < 0)
		die("socketpair", errno);
	m.u.accept.caps = SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE | SAN_CAP_DIRECT_READ;
	m.u.accept.nonce = 0x5151515151515151ull;
	m.u.accept.params = &mine;
	m.u.accept.params_len = sizeof(mine);
	if (san_sidechan_send(side, &m, pair[1]) == 0)
		(*accepts)++;
	close(pair[1]); /* pair[0] is kept open: a doorbell nobody rings */
}

static bool proposal_changed(const struct proposal *p)
{
	bool changed = true;
	void *map;

	if (!p->len || !p->copy)
		return false; /* nothing to compare: counted as unchanged, and said below */
	map = mmap(NULL, p->len, PROT_READ, MAP_SHARED, p->memfd, 0);
	if (map == MAP_FAILED)
		return true;
	changed = memcmp(map, p->copy, p->rings) != 0 ||
		  !all_zero((uint8_t *)map + p->rings, p->len - p->rings);
	munmap(map, p->len);
	return changed;
}

static int do_listen(const char *ip, const char *port, const char *stopfile)
{
	struct san_sidechan_name names[SAN_SIDECHAN_DEST_NAMES];
	static struct proposal props[MAX_PROPOSALS];
	int nprops = 0, proposes = 0, accepts = 0, switches = 0, aborts = 0, reason = 0;
	int changed = 0, uncopied = 0, lfd, r;
	struct san_addr a;
	uint64_t netns;
	double end = now_s() + 60;

	addr_of(ip, port, &a);
	r = san_sidechan_netns(&netns);
	if (r < 0)
		die("netns", r);
	if (san_sidechan_dest_names(&a, netns, names) < 1)
		die("names", EINVAL);
	lfd = san_sidechan_listen(&names[0]);
	if (lfd < 0)
		die("listen on the exact name", lfd);
	printf("sansquat: listening\n");
	fflush(stdout);
	while (now_s() < end && access(stopfile, F_OK) != 0) {
		struct pollfd pf[MAX_PROPOSALS + 1];
		int n = 0, polled = nprops;

		pf[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < polled; i++)
			pf[n++] = (struct pollfd){ .fd = props[i].side, .events = POLLIN };
		if (poll(pf, (nfds_t)n, 20) <= 0)
			continue;
		if (pf[0].revents) {
			int side = san_sidechan_accept(lfd);
			struct san_side_rx rx;

			if (side >= 0) {
				/* the PROPOSE is sent right after connect(): wait for it a little */
				struct pollfd one = { .fd = side, .events = POLLIN };

				(void)poll(&one, 1, 1000);
				r = san_sidechan_recv(side, &rx, true);
				if (r == 0 && rx.msg.type == SAN_T_PROPOSE && rx.fd >= 0 &&
				    nprops < MAX_PROPOSALS) {
					proposes++;
					take_proposal(&props[nprops++], &rx, side, &accepts);
				} else {
					close(side);
				}
				if (r == 0)
					san_side_rx_close_fds(&rx);
			}
		}
		for (int i = 0; i < polled; i++) {
			struct san_side_rx rx;

			if (props[i].side < 0 || !pf[i + 1].revents)
				continue;
			r = san_sidechan_recv(props[i].side, &rx, true);
			if (r == -EAGAIN)
				continue;
			if (r < 0) {
				close(props[i].side);
				props[i].side = -1;
				continue;
			}
			if (rx.msg.type == SAN_T_SWITCH)
				switches++;
			if (rx.msg.type == SAN_T_ABORT) {
				aborts++;
				reason = rx.msg.u.abort.reason;
			}
			san_side_rx_close_fds(&rx);
		}
	}
	for (int i = 0; i < nprops; i++) {
		changed += proposal_changed(&props[i]);
		uncopied += !props[i].copy;
	}
	printf("sansquat: proposes=%d accepts=%d switches=%d aborts=%d abort_reason=%d changed=%d"
	       " uncopied=%d\n",
	       proposes, accepts, switches, aborts, reason, changed, uncopied);
	return 0;
}

/* ---- propose ------------------------------------------------------------------------------ */

/* A memfd laid out as a connector's: both rings initialised, both areas, sealed. */
static int rings_memfd(void)
{
	size_t one = san_shm_ring_bytes(RING_SIZE);
	size_t bulk_off = (2 * one + 4095) & ~(size_t)4095;
	size_t len = bulk_off + 2 * (size_t)BULK_SIZE;
	int fd = memfd_create("sansquat", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	uint8_t *base;

	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		die("memfd", errno);
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		die("mmap", errno);
	if (san_shm_ring_init(base, one, RING_SIZE) < 0 ||
	    san_shm_ring_init(base + one, one, RING_SIZE) < 0)
		die("ring init", EINVAL);
	munmap(base, len);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		die("seals", errno);
	return fd;
}

static int do_propose(char **av)
{
	struct shm_params prm = { .pid = (uint32_t)getpid(), .fd_hint = -1,
				  .ring_size = RING_SIZE, .bulk_size = BULK_SIZE };
	struct san_msg m = { .type = SAN_T_PROPOSE };
	struct san_sidechan_name used;
	struct san_side_rx rx;
	struct san_addr src, dst;
	uint64_t netns;
	int side, memfd, r;

	addr_of(av[0], av[1], &src);
	addr_of(av[2], av[3], &dst);
	r = san_sidechan_netns(&netns);
	if (r < 0)
		die("netns", r);
	side = san_sidechan_connect_dest(&dst, netns, &used);
	if (side < 0)
		die("no side channel at the destination", side);
	memfd = rings_memfd();
	m.u.propose.ver_min = m.u.propose.ver_max = SAN_PROTO_VERSION;
	m.u.propose.provider = SAN_PROV_SHM;
	m.u.propose.caps = SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE | SAN_CAP_DIRECT_READ;
	m.u.propose.nonce = 0x7171717171717171ull;
	m.u.propose.src = src;
	m.u.propose.dst = dst;
	m.u.propose.params = &prm;
	m.u.propose.params_len = sizeof(prm);
	r = san_sidechan_send(side, &m, memfd);
	if (r < 0)
		die("send PROPOSE", r);
	for (int tries = 0; tries < 100; tries++) {
		struct pollfd one = { .fd = side, .events = POLLIN };

		(void)poll(&one, 1, 100);
		r = san_sidechan_recv(side, &rx, true);
		if (r != -EAGAIN)
			break;
	}
	if (r < 0)
		printf("sansquat: answer none (%s)\n", strerror(-r));
	else if (rx.msg.type == SAN_T_REJECT)
		printf("sansquat: answer REJECT reason=%u\n", rx.msg.u.reject.reason);
	else if (rx.msg.type == SAN_T_ACCEPT)
		printf("sansquat: answer ACCEPT\n");
	else
		printf("sansquat: answer type=%u\n", rx.msg.type);
	if (r == 0)
		san_side_rx_close_fds(&rx);
	close(side);
	close(memfd);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "listen"))
		return do_listen(argv[2], argv[3], argv[4]);
	if (argc == 6 && !strcmp(argv[1], "propose"))
		return do_propose(argv + 2);
	usage();
	return 2;
}
