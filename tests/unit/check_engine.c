/* tests/unit: the progress thread — lazy start, ordered work, signal mask, stop, fork. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_engine.h"
#include "core/san_fdtable.h"
#include "tests/unit/suites.h"

#define NWORK 1000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int seen[NWORK], nseen;
static atomic_int bad_thread, bad_guard, bad_mask;

static void record(void *arg)
{
	sigset_t cur;

	if (!san_engine_on_thread() || !san_engine_loop())
		atomic_fetch_add(&bad_thread, 1);
	if (!san_fd_guarded())
		atomic_fetch_add(&bad_guard, 1);
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	if (!sigismember(&cur, SIGINT) || !sigismember(&cur, SIGTERM))
		atomic_fetch_add(&bad_mask, 1);

	pthread_mutex_lock(&mu);
	seen[nseen++] = (int)(long)arg;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

static void wait_for(int n)
{
	pthread_mutex_lock(&mu);
	while (nseen < n)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static void reset(void)
{
	nseen = 0;
	atomic_store(&bad_thread, 0);
	atomic_store(&bad_guard, 0);
	atomic_store(&bad_mask, 0);
}

START_TEST(test_work_runs_in_order_on_the_thread)
{
	reset();
	ck_assert(!san_engine_on_thread());
	for (long i = 0; i < NWORK; i++)
		ck_assert_int_eq(san_engine_call(record, (void *)i), 0);
	wait_for(NWORK);
	for (int i = 0; i < NWORK; i++)
		ck_assert_int_eq(seen[i], i);
	ck_assert_int_eq(atomic_load(&bad_thread), 0);
	ck_assert_int_eq(atomic_load(&bad_guard), 0);
	ck_assert_int_eq(atomic_load(&bad_mask), 0);
	ck_assert(!san_fd_guarded()); /* the caller's guard is untouched */
	san_engine_stop();
}
END_TEST

START_TEST(test_stop_runs_queued_work_and_restarts)
{
	reset();
	ck_assert_int_eq(san_engine_start(), 0);
	ck_assert_int_eq(san_engine_start(), 0); /* idempotent */
	for (long i = 0; i < 10; i++)
		ck_assert_int_eq(san_engine_call(record, (void *)i), 0);
	san_engine_stop();
	ck_assert_int_eq(nseen, 10); /* nothing queued is dropped by stop */
	san_engine_stop();	     /* stopping a stopped engine is harmless */

	ck_assert_int_eq(san_engine_call(record, (void *)10L), 0); /* starts it again */
	wait_for(11);
	ck_assert_int_eq(seen[10], 10);
	san_engine_stop();
}
END_TEST

static void *caller(void *arg)
{
	long base = (long)arg;

	for (long i = 0; i < NWORK / 4; i++)
		if (san_engine_call(record, (void *)(base + i)) != 0)
			atomic_fetch_add(&bad_thread, 1);
	return NULL;
}

START_TEST(test_many_threads_lose_nothing)
{
	pthread_t t[4];
	int count[4] = { 0 };

	reset();
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, caller, (void *)(i * (NWORK / 4)));
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	wait_for(NWORK);
	san_engine_stop();
	ck_assert_int_eq(nseen, NWORK);
	/* Per caller, its items ran in its order. */
	for (int i = 0; i < NWORK; i++) {
		int who = seen[i] / (NWORK / 4);

		ck_assert_int_eq(seen[i] % (NWORK / 4), count[who]);
		count[who]++;
	}
	ck_assert_int_eq(atomic_load(&bad_thread), 0);
}
END_TEST

START_TEST(test_fork_child_gets_its_own_engine)
{
	pid_t pid;
	int status;

	reset();
	ck_assert_int_eq(san_engine_call(record, (void *)0L), 0);
	wait_for(1);

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* As the preload's pthread_atfork child handler would. */
		san_engine_atfork_child();
		pthread_mutex_init(&mu, NULL);
		pthread_cond_init(&cv, NULL);
		if (san_engine_call(record, (void *)1L) != 0)
			_exit(2);
		wait_for(2);
		san_engine_stop();
		_exit(seen[1] == 1 && atomic_load(&bad_thread) == 0 ? 0 : 3);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);

	/* The parent's engine is unaffected by the child's. */
	ck_assert_int_eq(san_engine_call(record, (void *)1L), 0);
	wait_for(2);
	san_engine_stop();
}
END_TEST

Suite *make_engine_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("progress thread");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_work_runs_in_order_on_the_thread);
	tcase_add_test(tc, test_stop_runs_queued_work_and_restarts);
	tcase_add_test(tc, test_many_threads_lose_nothing);
	tcase_add_test(tc, test_fork_child_gets_its_own_engine);
	suite_add_tcase(s, tc);
	return s;
}
