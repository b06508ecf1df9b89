/* tests/unit: core/san_sig — how a call ends after a handler ran while the library slept. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/san_sig.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

static void on_sig(int sig)
{
	(void)sig;
}

/* The process's actions before set_restart, put back by restore(); saved[sig]: read. */
static struct sigaction old[NSIG];
static bool saved[NSIG];

/* Every installed handler gets SA_RESTART, or loses it (SIGUSR1 installed in any case). */
static void set_restart(bool restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	memset(saved, 0, sizeof(saved));
	sa.sa_handler = on_sig;
	REQUIRE(sigaction(SIGUSR1, NULL, &old[SIGUSR1]) == 0);
	saved[SIGUSR1] = true;
	REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction cur;

		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &cur) != 0)
			continue;
		if (sig != SIGUSR1) {
			old[sig] = cur;
			saved[sig] = true;
		}
		if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)
			continue;
		if (restart)
			cur.sa_flags |= SA_RESTART;
		else
			cur.sa_flags &= ~SA_RESTART;
		REQUIRE(sigaction(sig, &cur, NULL) == 0);
	}
}

/* (a checked teardown: it runs after a failed test too, in no-fork mode as well) */
static void restore(void)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (saved[sig])
			(void)sigaction(sig, &old[sig], NULL);
	memset(saved, 0, sizeof(saved));
}

START_TEST(test_nothing_noted)
{
	san_sig_forget();
	REQUIRE_EQ(san_sig_take_noted(false), 0);
	REQUIRE_EQ(san_sig_take_noted(true), 0);
}
END_TEST

START_TEST(test_interrupt)
{
	set_restart(false);
	san_sig_note_eintr();
	REQUIRE_EQ(san_sig_take_noted(false), -EINTR);
	/* taken: the call's next sleep is an ordinary one */
	REQUIRE_EQ(san_sig_take_noted(false), 0);
}
END_TEST

START_TEST(test_restart)
{
	set_restart(true);
	REQUIRE(san_sig_restarts(false));
	san_sig_note_eintr();
	san_sig_note_eintr(); /* (twice is once) */
	REQUIRE_EQ(san_sig_take_noted(false), 1);
	REQUIRE_EQ(san_sig_take_noted(false), 0);
	/* a socket timeout: the kernel restarts no call then */
	san_sig_note_eintr();
	REQUIRE_EQ(san_sig_take_noted(true), -EINTR);
}
END_TEST

START_TEST(test_forget)
{
	/* a note left by an upgrade whose call never slept after it is not the next one's */
	san_sig_note_eintr();
	san_sig_forget();
	REQUIRE_EQ(san_sig_take_noted(false), 0);
}
END_TEST

/* ---- the trampoline (san_sig_sigaction), libc's sigaction as the real one ---- */

static volatile sig_atomic_t ran, ran_signo, ran_value, ran_uc;

static void on_plain(int sig)
{
	ran++;
	ran_signo = sig;
}

static void on_info(int sig, siginfo_t *si, void *uc)
{
	ran++;
	ran_signo = si ? si->si_signo : -sig;
	ran_value = si ? si->si_value.sival_int : -1;
	ran_uc = uc != NULL;
}

/* (the first time in a test only: restore() puts back what was there before the test) */
static void save(int sig)
{
	if (saved[sig])
		return;
	REQUIRE(sigaction(sig, NULL, &old[sig]) == 0);
	saved[sig] = true;
}

/* Install @fn for @sig through the trampoline with @flags; what the kernel now holds. */
static struct sigaction install(int sig, void *fn, int flags)
{
	struct sigaction sa, k;

	save(sig);
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = flags;
	if (flags & SA_SIGINFO)
		sa.sa_sigaction = (void (*)(int, siginfo_t *, void *))fn;
	else
		sa.sa_handler = (void (*)(int))fn;
	REQUIRE(san_sig_sigaction(sig, &sa, NULL, sigaction) == 0);
	REQUIRE(sigaction(sig, NULL, &k) == 0);
	return k;
}

START_TEST(test_tramp_reads_back)
{
	struct sigaction k = install(SIGUSR1, (void *)on_plain, SA_RESTART), o;

	/* the kernel holds the trampoline, with the flags asked and SA_SIGINFO */
	REQUIRE(k.sa_handler != on_plain);
	REQUIRE(k.sa_flags & SA_RESTART);
	REQUIRE(k.sa_flags & SA_SIGINFO);
	/* the application reads back what it set */
	REQUIRE(san_sig_sigaction(SIGUSR1, NULL, &o, sigaction) == 0);
	REQUIRE(o.sa_handler == on_plain);
	REQUIRE(o.sa_flags & SA_RESTART);
	REQUIRE(!(o.sa_flags & SA_SIGINFO));
	REQUIRE(san_sig_app_handler((void *)k.sa_sigaction) == (void *)on_plain);
	/* replaced by SIG_IGN: the old action read as the application's handler, once */
	memset(&k, 0, sizeof(k));
	k.sa_handler = SIG_IGN;
	REQUIRE(san_sig_sigaction(SIGUSR1, &k, &o, sigaction) == 0);
	REQUIRE(o.sa_handler == on_plain);
	REQUIRE(san_sig_sigaction(SIGUSR1, NULL, &o, sigaction) == 0);
	REQUIRE(o.sa_handler == SIG_IGN);
	/* the trampoline put back as read raw is installed as it is (no trampoline in one) */
	k = install(SIGUSR1, (void *)on_plain, 0);
	REQUIRE(san_sig_sigaction(SIGUSR1, &k, NULL, sigaction) == 0);
	ran = 0;
	REQUIRE(raise(SIGUSR1) == 0);
	REQUIRE_EQ(ran, 1);
	/* refused (SIGKILL): an error, and the handler of SIGUSR1 untouched */
	k.sa_handler = on_plain;
	k.sa_flags = 0;
	errno = 0;
	REQUIRE(san_sig_sigaction(SIGKILL, &k, NULL, sigaction) == -1 && errno == EINVAL);
	REQUIRE(san_sig_sigaction(SIGUSR1, NULL, &o, sigaction) == 0);
	REQUIRE(o.sa_handler == on_plain);
}
END_TEST

START_TEST(test_tramp_calls)
{
	union sigval v = { .sival_int = 4242 };
	struct sigaction o;

	install(SIGUSR1, (void *)on_plain, 0);
	ran = ran_signo = 0;
	REQUIRE(raise(SIGUSR1) == 0);
	REQUIRE_EQ(ran, 1);
	REQUIRE_EQ(ran_signo, SIGUSR1);
	/* SA_SIGINFO: the handler's three arguments are the kernel's */
	install(SIGUSR2, (void *)on_info, SA_SIGINFO);
	ran = ran_signo = ran_value = ran_uc = 0;
	REQUIRE(sigqueue(getpid(), SIGUSR2, v) == 0);
	REQUIRE_EQ(ran, 1);
	REQUIRE_EQ(ran_signo, SIGUSR2);
	REQUIRE_EQ(ran_value, 4242);
	REQUIRE_EQ(ran_uc, 1);
	REQUIRE(san_sig_sigaction(SIGUSR2, NULL, &o, sigaction) == 0);
	REQUIRE(o.sa_sigaction == on_info && (o.sa_flags & SA_SIGINFO));
	/* SA_RESETHAND: the kernel's reset shows through */
	install(SIGUSR1, (void *)on_plain, SA_RESETHAND);
	ran = 0;
	REQUIRE(raise(SIGUSR1) == 0);
	REQUIRE_EQ(ran, 1);
	REQUIRE(san_sig_sigaction(SIGUSR1, NULL, &o, sigaction) == 0);
	REQUIRE(o.sa_handler == SIG_DFL);
}
END_TEST

START_TEST(test_tramp_restart_per_signal)
{
	struct san_sig_mark m;

	/* the process mixes both kinds: each signal's own flag decides, as in the kernel */
	install(SIGUSR1, (void *)on_plain, SA_RESTART);
	install(SIGUSR2, (void *)on_plain, 0);
	REQUIRE(!san_sig_restarts(false)); /* (what is known without the trampoline) */
	san_sig_mark(&m);
	REQUIRE(raise(SIGUSR1) == 0);
	REQUIRE(san_sig_restarts_since(&m, false));
	REQUIRE(!san_sig_restarts_since(&m, true)); /* a socket timeout: never restarted */
	REQUIRE(raise(SIGUSR2) == 0);
	REQUIRE(!san_sig_restarts_since(&m, false));
	san_sig_mark(&m);
	REQUIRE(raise(SIGUSR2) == 0);
	REQUIRE(!san_sig_restarts_since(&m, false));
}
END_TEST

START_TEST(test_tramp_kernel_flag_and_copy)
{
	struct sigaction k = install(SIGUSR1, (void *)on_plain, SA_RESTART), o;
	struct san_sig_mark m;

	/* SA_RESTART cleared behind us (glibc's siginterrupt does so inside libc), then synced */
	k.sa_flags &= ~SA_RESTART;
	REQUIRE(sigaction(SIGUSR1, &k, NULL) == 0);
	san_sig_sync_flags(SIGUSR1, sigaction);
	san_sig_mark(&m);
	ran = 0;
	REQUIRE(raise(SIGUSR1) == 0);
	REQUIRE_EQ(ran, 1);
	REQUIRE(!san_sig_restarts_since(&m, false));
	/* our entry for SIGUSR1 copied to SIGUSR2 (read raw, installed through us): on_plain runs
	 * for SIGUSR2, and reads back as on_plain */
	save(SIGUSR2);
	k.sa_flags |= SA_RESTART;
	REQUIRE(san_sig_sigaction(SIGUSR2, &k, NULL, sigaction) == 0);
	ran = ran_signo = 0;
	REQUIRE(raise(SIGUSR2) == 0);
	REQUIRE_EQ(ran, 1);
	REQUIRE_EQ(ran_signo, SIGUSR2);
	REQUIRE(san_sig_sigaction(SIGUSR2, NULL, &o, sigaction) == 0);
	REQUIRE(o.sa_handler == on_plain);
}
END_TEST

START_TEST(test_tramp_noted_without_sleep)
{
	/*
	 * A handler that ran while the upgrade computed (no sleep of ours was cut short: no
	 * san_sig_note_eintr) still ends the call, or restarts it, by its own flag.
	 */
	install(SIGUSR1, (void *)on_plain, 0);
	install(SIGUSR2, (void *)on_plain, SA_RESTART);
	san_sig_forget();
	REQUIRE(raise(SIGUSR1) == 0);
	REQUIRE_EQ(san_sig_take_noted(false), -EINTR);
	REQUIRE_EQ(san_sig_take_noted(false), 0); /* taken */
	san_sig_forget();
	REQUIRE(raise(SIGUSR2) == 0);
	REQUIRE_EQ(san_sig_take_noted(false), 1);
	/* one before the upgrade began is not its */
	REQUIRE(raise(SIGUSR1) == 0);
	san_sig_forget();
	REQUIRE_EQ(san_sig_take_noted(false), 0);
}
END_TEST

Suite *make_sig_suite(void)
{
	Suite *s = suite_create("sig");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_checked_fixture(tc, NULL, restore);
	tcase_add_test(tc, test_nothing_noted);
	tcase_add_test(tc, test_interrupt);
	tcase_add_test(tc, test_restart);
	tcase_add_test(tc, test_forget);
	tcase_add_test(tc, test_tramp_reads_back);
	tcase_add_test(tc, test_tramp_calls);
	tcase_add_test(tc, test_tramp_restart_per_signal);
	tcase_add_test(tc, test_tramp_kernel_flag_and_copy);
	tcase_add_test(tc, test_tramp_noted_without_sleep);
	suite_add_tcase(s, tc);
	return s;
}
