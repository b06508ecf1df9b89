/*
 * core — logging: one line per message on stderr or in SANSWITCH_LOG_FILE, filtered by
 * SANSWITCH_LOG, at most SANSWITCH_LOG_RATE lines a second from one call site.
 */
#ifndef SAN_LOG_H
#define SAN_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "core/san_ratelimit.h"

enum san_log_level {
	SAN_LOG_ERROR = 0,
	SAN_LOG_WARN = 1,
	SAN_LOG_INFO = 2,
	SAN_LOG_DEBUG = 3,
};

/* Highest level printed; SAN_LOG_WARN until san_log_init() reads the environment. */
extern int san_log_level;

/* Lines a second one call site may print (SANSWITCH_LOG_RATE, san_config.c); 0: no limit. */
#define SAN_LOG_RATE_DEFAULT 20u
#define SAN_LOG_RATE_LIMIT 1000000u
extern uint32_t san_log_rate;

/* SANSWITCH_LOG and SANSWITCH_LOG_FILE. */
void san_log_init(void);
int san_log_parse_level(const char *s);
/* A line of @level, "sanswitch[pid]: level: message", not rate-limited. */
void san_log(enum san_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, within the budget of the call site @site (see san_log_at). */
void san_log_limited(struct san_ratelimit *site, enum san_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Bytes as they are, to where the log goes: the log file if there is one, else stderr. */
void san_log_raw(const char *buf, size_t len);
/* Bytes as they are, to stderr (never while fd 2 is one of the program's TCP connections). */
void san_log_stderr(const char *buf, size_t len);
/* The count of lines the rate limit held back, if any, as a line of its own (at exit). */
void san_log_flush_suppressed(void);
/* fork() child: its own count of held-back lines, its own file if the name has "%p". */
void san_log_atfork_child(void);
/* Before a seccomp filter: the log file opened now, no system call but write() for it after. */
void san_log_sandbox(void);

/*
 * The level test is inline so a disabled message costs one load and one
 * branch; the arguments are not even evaluated.
 */
#define san_log_enabled(lvl) \
	__builtin_expect(__atomic_load_n(&san_log_level, __ATOMIC_RELAXED) >= (int)(lvl), 0)

/*
 * Each use has a budget of its own (a static in the expansion): a message repeated in a loop,
 * once per connection in a storm, is cut at san_log_rate a second without silencing others.
 */
#define san_log_at(lvl, ...)                                               \
	do {                                                               \
		if (san_log_enabled(lvl)) {                                \
			static struct san_ratelimit san_log_site_;         \
			san_log_limited(&san_log_site_, lvl, __VA_ARGS__); \
		}                                                          \
	} while (0)

#define san_err(...) san_log_at(SAN_LOG_ERROR, __VA_ARGS__)
#define san_warn(...) san_log_at(SAN_LOG_WARN, __VA_ARGS__)
#define san_info(...) san_log_at(SAN_LOG_INFO, __VA_ARGS__)
#define san_debug(...) san_log_at(SAN_LOG_DEBUG, __VA_ARGS__)

#endif /* SAN_LOG_H */
