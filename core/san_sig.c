/* core — how a blocking call the library sleeps in answers a signal (san_sig.h). */
#include "core/san_sig.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/san_sys.h"

/* The kernel's struct sigaction for rt_sigaction (x86-64 and the generic layout). */
struct k_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};

/* A handler ran during this thread's upgrade (san_sig_take_noted). */
static __thread bool noted;

bool san_sig_restarts(bool has_timeout)
{
	if (has_timeout)
		return false;
	for (int sig = 1; sig < NSIG; sig++) {
		struct k_sigaction ka;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		/* the raw call: glibc's sigaction would be the application's if it wraps it */
		if (SAN_SYS(SYS_rt_sigaction, (long)sig, NULL, &ka, (long)sizeof(ka.mask)) < 0)
			continue;
		if (ka.handler == (void *)SIG_DFL || ka.handler == (void *)SIG_IGN)
			continue;
		if (!(ka.flags & SA_RESTART))
			return false;
	}
	return true;
}

void san_sig_note_eintr(void)
{
	noted = true;
}

void san_sig_forget(void)
{
	noted = false;
}

int san_sig_take_noted(bool has_timeout)
{
	bool n = noted;

	noted = false;
	if (!n)
		return 0;
	return san_sig_restarts(has_timeout) ? 1 : -EINTR;
}
