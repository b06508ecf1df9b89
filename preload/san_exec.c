/* preload — wrappers: process life (fork, daemon, the exec family, _exit, a seccomp sandbox). */
#include <linux/seccomp.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "core/san_sig.h"
#include "preload/san_preload.h"

/*
 * vfork() is counted, not diverted: while a child that borrows our memory
 * runs, san_fdtable_owned() must ask the kernel who we are (san_fdtable.c),
 * and it asks only while san_shared_children says such a child may exist.
 *
 * It cannot be a C wrapper: the vfork child borrows the parent's stack until
 * it execs or _exits, and a wrapper's frame would be trampled by the child
 * before the parent returns through it. So, as libc's own vfork does, the
 * return address is kept in a register (the child's registers are its own),
 * the system call is made here, and the parent lowers the count once it runs
 * again, that is once the child has exec'd or exited. The child returns with
 * the count still raised: its close() and dup2() leave the parent's table
 * alone. Programs that vfork+exec reach our exec wrappers in the child as
 * before. x86-64 only; elsewhere libc's vfork runs and the owner check always
 * makes its system call.
 */
#ifdef SAN_SHARED_CHILDREN_COUNTED
#define SAN_STR_(x) #x
#define SAN_STR(x) SAN_STR_(x)

int san_vfork_failed(int err) __attribute__((visibility("hidden"), used));
int san_vfork_failed(int err)
{
	errno = err;
	return -1;
}

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	endbr64\n"
	"	popq %rdi\n"			     /* the return address: out of the shared stack */
	"	lock incl san_shared_children(%rip)\n" /* before the child can run */
	"	movl $" SAN_STR(SYS_vfork) ", %eax\n"
	"	syscall\n"
	"	pushq %rdi\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"				     /* the child: the count stays raised */
	"	lock decl san_shared_children(%rip)\n" /* the parent: the child has gone */
	"	cmpq $-4095, %rax\n"
	"	jae 2f\n"
	"1:	ret\n"
	"2:	movl %eax, %edi\n"
	"	negl %edi\n"
	"	jmp san_vfork_failed\n"
	".size vfork, .-vfork\n");
#endif

/*
 * clone() with CLONE_VM and without CLONE_THREAD makes a child that shares our
 * memory as a vfork child does (posix_spawn-like code calls it so): counted
 * the same way. With CLONE_VFORK the parent resumes only once the child has
 * exec'd or exited; a child without it may live on, and the count stays
 * raised for good (every owner check then asks the kernel: right, and slower).
 * A clone() without CLONE_VM is a fork that runs no fork handlers (so is
 * _Fork(), below): its child's table still names the parent as owner, so the
 * count is raised across the call and lowered in the parent only; the child
 * keeps its raised copy, asks the kernel, and finds it does not own the table,
 * as before the count existed. The optional arguments are passed on as they
 * came: libc reads only those its flags ask for.
 */
SAN_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	__typeof__(san_real.clone) real = SAN_REAL(clone);
	bool counted = !(flags & CLONE_THREAD);
	bool lives_on = (flags & CLONE_VM) && !(flags & CLONE_VFORK);
	pid_t *ptid, *ctid;
	void *tls;
	va_list ap;
	int r;

	if (unlikely(!real))
		return san_enosys();
	va_start(ap, arg);
	ptid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	ctid = va_arg(ap, pid_t *);
	va_end(ap);
	if (counted)
		__atomic_add_fetch(&san_shared_children, 1, __ATOMIC_SEQ_CST);
	r = real(fn, stack, flags, arg, ptid, tls, ctid);
	if (counted && (r < 0 || !lives_on))
		__atomic_sub_fetch(&san_shared_children, 1, __ATOMIC_SEQ_CST);
	return r;
}

/* _Fork(): fork() without the fork handlers; counted as clone() without CLONE_VM, above. */
SAN_EXPORT pid_t _Fork(void)
{
	__typeof__(san_real._Fork) real = SAN_REAL(_Fork);
	pid_t r;

	if (unlikely(!real))
		return san_enosys();
	__atomic_add_fetch(&san_shared_children, 1, __ATOMIC_SEQ_CST);
	r = real();
	if (r != 0) /* the parent, or a failure: the child keeps its raised copy */
		__atomic_sub_fetch(&san_shared_children, 1, __ATOMIC_SEQ_CST);
	else
		san_sig_atfork_child(); /* (no fork handler runs: a sigaction lock another held) */
	return r;
}

/*
 * The child gets the fd table as a memory copy, which is right: it holds
 * the same fds. Its hook runs from a pthread_atfork() child handler (see
 * san_real.c) so that forks libc makes itself (daemon()) run it too. This
 * wrapper only tells the engine what fork() returned: the parent handlers
 * run after a failed fork too, and the connections they shared with no child
 * must be the parent's alone again (san_core_fork_done).
 */
SAN_EXPORT pid_t fork(void)
{
	pid_t r;
	int e;

	san_core_fork_begin();
	r = SAN_REAL(fork)();
	e = errno;
	san_core_fork_done(r);
	errno = e;
	return r;
}

/*
 * daemon(), as glibc's does it (fork, the parent exits at once, setsid, chdir("/"), /dev/null
 * onto 0, 1 and 2 when it is a character device, ENODEV otherwise), but through our own fork,
 * _exit and dup2: glibc's makes those calls inside libc, and its dup2s over a switched
 * connection on 0-2 (an inetd child's) were unseen, so the process's writes to 1 still went to
 * the peer where glibc's went to /dev/null.
 */
SAN_EXPORT int daemon(int nochdir, int noclose)
{
	struct stat st;
	pid_t pid = fork();
	int fd, e = 0;

	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -1;
	if (!nochdir)
		(void)chdir("/");
	if (noclose)
		return 0;
	fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0)
		e = errno;
	else if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3))
		e = ENODEV;
	if (e) {
		(void)close(fd);
		errno = e;
		return -1;
	}
	(void)dup2(fd, STDIN_FILENO);
	(void)dup2(fd, STDOUT_FILENO);
	(void)dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		(void)close(fd);
	return 0;
}

/*
 * Every exec runs the engine's hook first, then the real call. If the exec
 * fails, it returns -1 with the errno the real call set (the hooks must keep
 * errno, and the process simply goes on: exec_failed).
 */
static int exec_failed(int r)
{
	int e = errno;

	san_core_exec_failed();
	errno = e;
	return r;
}

static int san_execve(const char *path, char *const argv[], char *const envp[])
{
	__typeof__(san_real.execve) fn = SAN_REAL(execve);

	san_debug("execve %s", path);
	san_core_before_exec(envp, path, false);
	return exec_failed(fn(path, argv, envp));
}

static int san_execv(const char *path, char *const argv[])
{
	__typeof__(san_real.execv) fn = SAN_REAL(execv);

	san_debug("execv %s", path);
	san_core_before_exec(environ, path, false);
	return exec_failed(fn(path, argv));
}

static int san_execvp(const char *file, char *const argv[])
{
	__typeof__(san_real.execvp) fn = SAN_REAL(execvp);

	san_debug("execvp %s", file);
	san_core_before_exec(environ, file, true);
	return exec_failed(fn(file, argv));
}

SAN_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return san_execve(path, argv, envp);
}

SAN_EXPORT int execv(const char *path, char *const argv[])
{
	return san_execv(path, argv);
}

SAN_EXPORT int execvp(const char *file, char *const argv[])
{
	return san_execvp(file, argv);
}

SAN_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	__typeof__(san_real.execvpe) fn = SAN_REAL(execvpe);

	if (unlikely(!fn))
		return san_enosys();
	san_debug("execvpe %s", file);
	san_core_before_exec(envp, file, true);
	return exec_failed(fn(file, argv, envp));
}

SAN_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	__typeof__(san_real.fexecve) fn = SAN_REAL(fexecve);

	if (unlikely(!fn))
		return san_enosys();
	san_debug("fexecve fd %d", fd);
	san_core_before_exec(envp, NULL, false);
	return exec_failed(fn(fd, argv, envp));
}

/*
 * The execl*() family: count the arguments up to the terminating NULL, then
 * build argv on the stack and take the matching execv*() path. The stack
 * array is what libc's own execl() does; the arguments had to fit on the
 * caller's stack already. E2BIG past INT_MAX arguments, as libc.
 */
static long san_exec_argc(const char *arg0, va_list *ap)
{
	long argc = 1;

	if (!arg0)
		return 0;
	while (va_arg(*ap, const char *)) {
		if (++argc == 0x7fffffff)
			return -E2BIG;
	}
	return argc;
}

static void san_exec_argv(char **argv, long argc, const char *arg0, va_list *ap)
{
	long i;

	if (argc > 0)
		argv[0] = (char *)arg0;
	for (i = 1; i < argc; i++)
		argv[i] = va_arg(*ap, char *);
	argv[argc] = NULL;
}

SAN_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	long argc;

	va_start(ap, arg);
	argc = san_exec_argc(arg, &ap);
	va_end(ap);
	if (argc < 0)
		return (int)san_ret(argc);
	{
		char *argv[argc + 1];

		va_start(ap, arg);
		san_exec_argv(argv, argc, arg, &ap);
		va_end(ap);
		return san_execv(path, argv);
	}
}

SAN_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	long argc;

	va_start(ap, arg);
	argc = san_exec_argc(arg, &ap);
	va_end(ap);
	if (argc < 0)
		return (int)san_ret(argc);
	{
		char *argv[argc + 1];

		va_start(ap, arg);
		san_exec_argv(argv, argc, arg, &ap);
		va_end(ap);
		return san_execvp(file, argv);
	}
}

/* execle(path, arg0, ..., NULL, envp): envp follows the NULL. */
SAN_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;
	va_list ap;
	long argc;

	va_start(ap, arg);
	argc = san_exec_argc(arg, &ap);
	va_end(ap);
	if (argc < 0)
		return (int)san_ret(argc);
	{
		char *argv[argc + 1];

		va_start(ap, arg);
		san_exec_argv(argv, argc, arg, &ap);
		if (argc > 0)
			(void)va_arg(ap, char *); /* the terminating NULL */
		envp = va_arg(ap, char *const *);
		va_end(ap);
		return san_execve(path, argv, envp);
	}
}

/*
 * _exit() and _Exit() skip the atexit() handlers, where the engine says
 * goodbye (the statistics line, the removal of the stats file); programs that
 * end this way on purpose (the verifier, forking servers' children) would
 * leave their file behind. The hook is async-signal-safe enough for an
 * _exit() in a signal handler: it takes no lock it cannot do without.
 */
SAN_EXPORT void _exit(int status)
{
	san_core_exit();
	SAN_REAL(_exit)(status);
	__builtin_unreachable();
}

SAN_EXPORT void _Exit(int status)
{
	__typeof__(san_real._Exit) fn = SAN_REAL(_Exit);

	san_core_exit();
	if (fn)
		fn(status);
	SAN_REAL(_exit)(status);
	__builtin_unreachable();
}

/*
 * prctl(PR_SET_SECCOMP): the program confines itself (OpenSSH's pre-authentication child, a
 * browser's renderer): from then on a system call its filter does not allow kills it (SIGSYS),
 * and ours are not the ones it made (a read() we make a recvmsg(), our polls, getsockopt, the
 * stats file). The library steps aside first (san_core_sandboxed). Every prctl() takes at most
 * four more arguments, unsigned long each, as the kernel reads them.
 */
SAN_EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP && (a[0] == SECCOMP_MODE_FILTER || a[0] == SECCOMP_MODE_STRICT))
		san_core_sandboxed();
	return SAN_REAL(prctl)(option, a[0], a[1], a[2], a[3]);
}
