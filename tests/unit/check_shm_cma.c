/* tests/unit: core/san_shm_cma — reads and writes into another process, errors, fault injection. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_shm_cma.h"
#include "tests/unit/suites.h"

#define PAGE 4096

static uint8_t pat(uint32_t seed, size_t j)
{
	uint64_t x = ((j >> 3) ^ ((uint64_t)seed << 40)) * 0x9e3779b97f4a7c15ull;

	x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (j & 7)));
}

static void fill(uint8_t *b, size_t len, uint32_t seed, size_t from)
{
	for (size_t j = 0; j < len; j++)
		b[j] = pat(seed, from + j);
}

/* ---- the peer process ---------------------------------------------------------------------- */

/*
 * A child holding a buffer of len bytes filled with pat(seed), at an address it reports. It
 * then serves commands from the parent: verify (the first n bytes now hold pat(seed2)) and
 * quit. With guard, the buffer is one page followed by a PROT_NONE page (len is ignored).
 */
struct peer {
	pid_t pid;
	int cmd, rsp;
	uint64_t addr;
};

struct peer_cmd {
	char op; /* 'v' verify, 'q' quit */
	uint32_t seed;
	size_t len;
};

static void peer_serve(int cmd, int rsp, size_t len, uint32_t seed, bool guard)
{
	struct peer_cmd c;
	uint8_t *b;
	uint64_t a;

	if (guard) {
		b = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
		if (b == MAP_FAILED || mprotect(b + PAGE, PAGE, PROT_NONE))
			_exit(2);
		len = PAGE;
	} else {
		b = malloc(len ? len : 1);
		if (!b)
			_exit(2);
	}
	fill(b, len, seed, 0);
	a = (uintptr_t)b;
	if (write(rsp, &a, sizeof(a)) != sizeof(a))
		_exit(3);
	while (read(cmd, &c, sizeof(c)) == sizeof(c)) {
		char ok = 1;

		if (c.op == 'q')
			_exit(0);
		for (size_t j = 0; j < c.len && j < len; j++)
			if (b[j] != pat(c.seed, j))
				ok = 0;
		if (write(rsp, &ok, 1) != 1)
			_exit(4);
	}
	_exit(0);
}

static void peer_start(struct peer *p, size_t len, uint32_t seed, bool guard)
{
	int c[2], r[2];

	ck_assert_int_eq(pipe(c), 0);
	ck_assert_int_eq(pipe(r), 0);
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0) {
		close(c[1]);
		close(r[0]);
		peer_serve(c[0], r[1], len, seed, guard);
	}
	close(c[0]);
	close(r[1]);
	p->cmd = c[1];
	p->rsp = r[0];
	ck_assert_int_eq(read(p->rsp, &p->addr, sizeof(p->addr)), sizeof(p->addr));
}

static bool peer_verify(struct peer *p, uint32_t seed, size_t len)
{
	struct peer_cmd c;
	char ok = 0;

	memset(&c, 0, sizeof(c)); /* padding too: it goes through a pipe */
	c.op = 'v';
	c.seed = seed;
	c.len = len;

	ck_assert_int_eq(write(p->cmd, &c, sizeof(c)), sizeof(c));
	ck_assert_int_eq(read(p->rsp, &ok, 1), 1);
	return ok == 1;
}

static void peer_stop(struct peer *p)
{
	struct peer_cmd c;
	int status;

	memset(&c, 0, sizeof(c));
	c.op = 'q';

	ck_assert_int_eq(write(p->cmd, &c, sizeof(c)), sizeof(c));
	ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(p->cmd);
	close(p->rsp);
}

/* A pid that existed and no longer does (reaped). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return pid;
}

/*
 * Cut buf into n iovecs of random lengths 0..max (zero-length ones included); the last one
 * takes whatever is left. Returns the total they cover (<= len).
 */
static size_t cut_iov(struct iovec *v, size_t n, uint8_t *buf, size_t len, size_t max,
		      uint64_t seed)
{
	size_t off = 0;

	for (size_t i = 0; i < n; i++) {
		size_t l;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		l = (size_t)(seed >> 33) % (max + 1);

		if (l > len - off)
			l = len - off;
		v[i].iov_base = buf + off;
		v[i].iov_len = l;
		off += l;
	}
	return off;
}

static void cma_teardown(void)
{
	san_shm_cma_set_fault(0);
}

/* ---- transfers ----------------------------------------------------------------------------- */

#define BIG (4u * 1024 * 1024 + 123)
#define NIOV 3000 /* > IOV_MAX: the transfer takes several calls */

START_TEST(test_read_multi_iov)
{
	struct iovec *v = calloc(NIOV, sizeof(*v));
	uint8_t *buf = malloc(2 * BIG);
	struct san_shm_cma_region r;
	struct peer p;
	size_t covered, done = 1, got = 0;
	ssize_t n;

	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_nonnull(buf);
	peer_start(&p, BIG, 11, false);
	covered = cut_iov(v, NIOV, buf, 2 * BIG, 2 * BIG / NIOV * 2, 5);
	ck_assert_uint_gt(covered, BIG);
	r = (struct san_shm_cma_region){ .pid = p.pid, .addr = p.addr, .len = BIG };
	memset(buf, 0, 2 * BIG);
	n = san_shm_cma_read(&r, v, NIOV, &done);
	ck_assert_int_eq(n, BIG);
	ck_assert_uint_eq(done, BIG);
	/* The bytes landed in iovec order: buf holds them contiguously. */
	for (size_t j = 0; j < BIG; j++)
		if (buf[j] != pat(11, j))
			ck_abort_msg("byte %zu: %#x, want %#x", j, buf[j], pat(11, j));
	/* It took more than one call: the first IOV_MAX elements do not reach BIG. */
	for (size_t i = 0; i < IOV_MAX; i++)
		got += v[i].iov_len;
	ck_assert_uint_lt(got, BIG);

	/* Fewer local bytes than the region: moves what fits. */
	covered = cut_iov(v, 700, buf, BIG / 2, 2000, 9);
	n = san_shm_cma_read(&r, v, 700, NULL);
	ck_assert_int_eq(n, covered);
	for (size_t j = 0; j < covered; j++)
		ck_assert_uint_eq(buf[j], pat(11, j));

	/* A region in the middle of the buffer. */
	r.addr = p.addr + 1000;
	r.len = 5000;
	v[0] = (struct iovec){ buf, 5000 };
	ck_assert_int_eq(san_shm_cma_read(&r, v, 1, NULL), 5000);
	for (size_t j = 0; j < 5000; j++)
		ck_assert_uint_eq(buf[j], pat(11, 1000 + j));
	peer_stop(&p);
	free(buf);
	free(v);
}
END_TEST

START_TEST(test_write_multi_iov)
{
	struct iovec *v = calloc(NIOV, sizeof(*v));
	uint8_t *buf = malloc(2 * BIG);
	struct san_shm_cma_region r;
	struct peer p;
	size_t done = 0;

	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_nonnull(buf);
	peer_start(&p, BIG, 11, false);
	fill(buf, 2 * BIG, 22, 0);
	ck_assert_uint_gt(cut_iov(v, NIOV, buf, 2 * BIG, 2 * BIG / NIOV * 2, 7), BIG);
	r = (struct san_shm_cma_region){ .pid = p.pid, .addr = p.addr, .len = BIG };
	ck_assert_int_eq(san_shm_cma_write(&r, v, NIOV, &done), BIG);
	ck_assert_uint_eq(done, BIG);
	ck_assert(peer_verify(&p, 22, BIG));
	/* And a small one, a single iovec, at an offset. */
	fill(buf, 100, 33, 0);
	r.len = 100;
	v[0] = (struct iovec){ buf, 100 };
	ck_assert_int_eq(san_shm_cma_write(&r, v, 1, NULL), 100);
	ck_assert(peer_verify(&p, 33, 100));
	ck_assert(!peer_verify(&p, 33, 101));
	peer_stop(&p);
	free(buf);
	free(v);
}
END_TEST

START_TEST(test_empty)
{
	struct san_shm_cma_region r = { .pid = getpid(), .addr = 0, .len = 0 };
	uint8_t b[4];
	struct iovec v[3] = { { b, 0 }, { b, 0 }, { b, 0 } };
	size_t done = 7;

	ck_assert_int_eq(san_shm_cma_read(&r, v, 3, &done), 0);
	ck_assert_uint_eq(done, 0);
	r.len = 100; /* a region, but no local bytes: nothing to do, no call */
	ck_assert_int_eq(san_shm_cma_read(&r, v, 3, NULL), 0);
	ck_assert_int_eq(san_shm_cma_write(&r, v, 0, NULL), 0);
}
END_TEST

/* ---- errors -------------------------------------------------------------------------------- */

/*
 * The region runs from a good page into a PROT_NONE one: the first page moves, then EFAULT,
 * with done telling how far it got (the prefix a READ_DONE/WRITE_DONE FAILED reports).
 */
START_TEST(test_partial_efault)
{
	uint8_t buf[3 * 3000];
	struct iovec v[3] = { { buf, 3000 }, { buf + 3000, 3000 }, { buf + 6000, 3000 } };
	struct san_shm_cma_region r;
	struct peer p;
	size_t done = 0;

	peer_start(&p, 0, 44, true);
	r = (struct san_shm_cma_region){ .pid = p.pid, .addr = p.addr, .len = 2 * PAGE };
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(san_shm_cma_read(&r, v, 3, &done), -EFAULT);
	ck_assert_uint_eq(done, PAGE);
	for (size_t j = 0; j < PAGE; j++)
		ck_assert_uint_eq(buf[j], pat(44, j));
	ck_assert_uint_eq(buf[PAGE], 0);

	fill(buf, sizeof(buf), 55, 0);
	done = 0;
	ck_assert_int_eq(san_shm_cma_write(&r, v, 3, &done), -EFAULT);
	ck_assert_uint_eq(done, PAGE);
	ck_assert(peer_verify(&p, 55, PAGE));
	peer_stop(&p);
}
END_TEST

/*
 * A local buffer the kernel cannot copy to or from, that valgrind still sees as ordinary
 * memory (so the test stays clean under it): a shared mapping of an empty memfd, every byte
 * beyond end of file.
 */
static void *hole_page(void)
{
	int fd = memfd_create("san_cma_hole", MFD_CLOEXEC);
	void *m;

	ck_assert_int_ge(fd, 0);
	m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	close(fd);
	return m;
}

START_TEST(test_efault)
{
	struct san_shm_cma_region r;
	uint8_t buf[64];
	struct iovec v = { buf, sizeof(buf) };
	struct iovec bad = { hole_page(), 64 };
	struct peer p;
	size_t done = 9;

	memset(buf, 1, sizeof(buf));
	peer_start(&p, 4096, 66, false);
	r = (struct san_shm_cma_region){ .pid = p.pid, .addr = 8, .len = 64 };
	ck_assert_int_eq(san_shm_cma_read(&r, &v, 1, &done), -EFAULT); /* bad remote */
	ck_assert_uint_eq(done, 0);
	ck_assert_int_eq(san_shm_cma_write(&r, &v, 1, NULL), -EFAULT);
	ck_assert_int_eq(san_shm_cma_probe(p.pid, 8), -EFAULT);
	r.addr = p.addr;
	ck_assert_int_eq(san_shm_cma_read(&r, &bad, 1, NULL), -EFAULT); /* bad local */
	ck_assert_int_eq(san_shm_cma_write(&r, &bad, 1, NULL), -EFAULT);
	ck_assert_int_eq(san_shm_cma_read(&r, &v, 1, NULL), 64); /* and the good case */
	peer_stop(&p);
	munmap(bad.iov_base, PAGE);
}
END_TEST

START_TEST(test_esrch)
{
	pid_t pid = dead_pid();
	uint8_t buf[16] = { 0 };
	struct iovec v = { buf, sizeof(buf) };
	struct san_shm_cma_region r = { .pid = pid, .addr = (uintptr_t)buf, .len = 16 };
	size_t done = 5;

	ck_assert_int_eq(san_shm_cma_read(&r, &v, 1, &done), -ESRCH);
	ck_assert_uint_eq(done, 0);
	ck_assert_int_eq(san_shm_cma_write(&r, &v, 1, NULL), -ESRCH);
	ck_assert_int_eq(san_shm_cma_probe(pid, (uintptr_t)buf), -ESRCH);
}
END_TEST

/*
 * EPERM from the kernel's ptrace check. As root (CAP_SYS_PTRACE passes every check) a child
 * drops to nobody and probes its root parent; otherwise the target makes itself non-dumpable.
 */
static volatile uint8_t eperm_target = 0x5a;

START_TEST(test_eperm)
{
	int status;
	pid_t pid;

	if (geteuid() == 0) {
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			int e;

			if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
				_exit(10);
			e = san_shm_cma_probe(getppid(), (uintptr_t)&eperm_target);
			_exit(e == -EPERM ? 0 : e == 0 ? 11 : 12);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x",
			      status);
	} else {
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			prctl(PR_SET_DUMPABLE, 0);
			pause();
			_exit(0);
		}
		usleep(100000);
		ck_assert_int_eq(san_shm_cma_probe(pid, (uintptr_t)&eperm_target), -EPERM);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
}
END_TEST

START_TEST(test_probe)
{
	struct peer p;

	peer_start(&p, 100, 1, false);
	ck_assert_int_eq(san_shm_cma_probe(p.pid, p.addr), 0);
	ck_assert_int_eq(san_shm_cma_probe(p.pid, p.addr + 99), 0);
	ck_assert_int_eq(san_shm_cma_probe(getpid(), (uintptr_t)&eperm_target), 0);
	peer_stop(&p);
}
END_TEST

START_TEST(test_fault_injection)
{
	static const int errs[] = { EPERM, ENOMEM };
	uint8_t buf[256];
	struct iovec v = { buf, sizeof(buf) };
	struct san_shm_cma_region r;
	struct peer p;
	size_t done;

	peer_start(&p, sizeof(buf), 77, false);
	r = (struct san_shm_cma_region){ .pid = p.pid, .addr = p.addr, .len = sizeof(buf) };
	for (size_t k = 0; k < sizeof(errs) / sizeof(errs[0]); k++) {
		san_shm_cma_set_fault(errs[k]);
		done = 3;
		memset(buf, 0, sizeof(buf));
		ck_assert_int_eq(san_shm_cma_read(&r, &v, 1, &done), -errs[k]);
		ck_assert_uint_eq(done, 0);
		ck_assert_uint_eq(buf[0], 0); /* nothing moved */
		ck_assert_int_eq(san_shm_cma_write(&r, &v, 1, NULL), -errs[k]);
		ck_assert_int_eq(san_shm_cma_probe(p.pid, p.addr), -errs[k]);
	}
	ck_assert(peer_verify(&p, 77, sizeof(buf))); /* the failed write did not happen */
	san_shm_cma_set_fault(-EPERM);		     /* either sign */
	ck_assert_int_eq(san_shm_cma_probe(p.pid, p.addr), -EPERM);
	san_shm_cma_set_fault(0);
	ck_assert_int_eq(san_shm_cma_probe(p.pid, p.addr), 0);
	ck_assert_int_eq(san_shm_cma_read(&r, &v, 1, NULL), sizeof(buf));
	ck_assert_uint_eq(buf[5], pat(77, 5));
	peer_stop(&p);
}
END_TEST

Suite *make_shm_cma_suite(void)
{
	Suite *s = suite_create("shm_cma");
	TCase *tc = tcase_create("cma");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_checked_fixture(tc, NULL, cma_teardown);
	tcase_add_test(tc, test_read_multi_iov);
	tcase_add_test(tc, test_write_multi_iov);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_partial_efault);
	tcase_add_test(tc, test_efault);
	tcase_add_test(tc, test_esrch);
	tcase_add_test(tc, test_eperm);
	tcase_add_test(tc, test_probe);
	tcase_add_test(tc, test_fault_injection);
	suite_add_tcase(s, tc);
	return s;
}
