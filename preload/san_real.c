/* preload — the table of real libc functions: resolved once with dlsym(RTLD_NEXT). */
#include "preload/san_preload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

struct san_real san_real;

/*
 * The names, as one block of characters and the table as offsets into it and into struct
 * san_real: a table of pointers would cost the dynamic linker a relocation per name at every
 * process start, and a pointer to each wrapper (to compare with what dlsym found) a symbol
 * lookup per wrapper, 63 of them, in every process the library is preloaded into.
 */
static const struct san_real_names {
#define SAN_REAL_NAME_FIELD(fn, ret, params, req) char fn[sizeof(#fn)];
	SAN_REAL_FUNCS(SAN_REAL_NAME_FIELD)
#undef SAN_REAL_NAME_FIELD
} san_real_names = {
#define SAN_REAL_NAME_INIT(fn, ret, params, req) .fn = #fn,
	SAN_REAL_FUNCS(SAN_REAL_NAME_INIT)
#undef SAN_REAL_NAME_INIT
};

struct san_real_sym {
	unsigned short name;   /* offset of the name in san_real_names */
	unsigned short offset; /* of the pointer in struct san_real */
	bool required;
};

_Static_assert(sizeof(struct san_real_names) <= 0xffff && sizeof(struct san_real) <= 0xffff,
	       "san_real_sym offsets are unsigned short");

static const struct san_real_sym san_real_syms[] = {
#define SAN_REAL_SYM(fn, ret, params, req) \
	{ offsetof(struct san_real_names, fn), offsetof(struct san_real, fn), req },
	SAN_REAL_FUNCS(SAN_REAL_SYM)
#undef SAN_REAL_SYM
};

/*
 * This library's image, from its ELF header to the end of its data (symbols the linker defines;
 * hidden, so reaching them costs no relocation either): a real function found in there would be
 * one of our own wrappers.
 */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

bool san_real_is_ours(const void *fn)
{
	return (const char *)fn >= __ehdr_start && (const char *)fn < _end;
}

/* A fork() child owns its copy of the table; a vfork() child, which skips this, does not. */
static void san_real_atfork_child(void)
{
	san_fdtable_set_owner((int)syscall(SYS_getpid));
	/* a vfork child another thread had running is the parent's, not ours (san_fdtable.c) */
	__atomic_store_n(&san_shared_children, 0, __ATOMIC_RELAXED);
}

static pthread_once_t san_real_once = PTHREAD_ONCE_INIT;

/* No stdio, no san_log: the process is about to abort and the logger may be what failed. */
static void __attribute__((noreturn)) san_real_die(const char *name, const char *why)
{
	const char *parts[] = { "libsanswitch: cannot resolve real '", name, "': ", why, "\n" };
	size_t i;

	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		san_log_raw(parts[i], strlen(parts[i]));
	abort();
}

static void san_real_lookup(void)
{
	size_t i;

	for (i = 0; i < sizeof(san_real_syms) / sizeof(san_real_syms[0]); i++) {
		const struct san_real_sym *s = &san_real_syms[i];
		const char *name = (const char *)&san_real_names + s->name;
		void **slot = (void **)((char *)&san_real + s->offset);
		void *fn = dlsym(RTLD_NEXT, name);

		if (!fn) {
			const char *why = dlerror();

			if (s->required)
				san_real_die(name, why ? why : "not found");
			continue;
		}
		if (san_real_is_ours(fn))
			san_real_die(name, "resolves to the libsanswitch wrapper itself");
		__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	}
}

/*
 * Everything the library needs before its first wrapper can run, in this
 * order: the policy and log level (the rest may log), the fd table (a wrapper
 * that sees a real pointer set may record an fd) and the statistics, all in
 * san_core_init(); then the real functions.
 */
static void san_real_init_once(void)
{
	int saved = errno;

	san_core_init();
	san_fdtable_set_owner((int)syscall(SYS_getpid));
	san_real_lookup();
	/*
	 * A child handler rather than work in our fork() wrapper: libc forks
	 * for itself too (daemon()), and the handler runs for those as well.
	 */
	/* Child handlers run in registration order: the owner first, the core may write the table. */
	pthread_atfork(NULL, NULL, san_real_atfork_child);
	pthread_atfork(san_core_atfork_prepare, san_core_atfork_parent, san_core_atfork_child);
	san_debug("loaded: fd table of %u slots", san_fdt.size);
	san_core_loaded();
	san_stdio_bridge(); /* (after the adoption: the numbers it bridges are the ones adopted) */
	/* dlsym() and friends may set errno; a wrapper's success must not show it. */
	errno = saved;
}

const struct san_real *san_real_resolve(void)
{
	pthread_once(&san_real_once, san_real_init_once);
	return &san_real;
}

static void __attribute__((constructor)) san_real_ctor(void)
{
	san_real_resolve();
}
