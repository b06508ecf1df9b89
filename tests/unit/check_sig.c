/* tests/unit: core/san_sig — how a call ends after a handler ran while the library slept. */
#include <errno.h>
#include <signal.h>
#include <string.h>

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
	suite_add_tcase(s, tc);
	return s;
}
