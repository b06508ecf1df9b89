/* core — logging: one line per message on stderr, filtered by SANSWITCH_LOG. */
#ifndef SAN_LOG_H
#define SAN_LOG_H

#include <stddef.h>

enum san_log_level {
	SAN_LOG_ERROR = 0,
	SAN_LOG_WARN = 1,
	SAN_LOG_INFO = 2,
	SAN_LOG_DEBUG = 3,
};

/* Highest level printed; SAN_LOG_WARN until san_log_init() reads the environment. */
extern int san_log_level;

void san_log_init(void);
int san_log_parse_level(const char *s);
void san_log(enum san_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void san_log_raw(const char *buf, size_t len);

/*
 * The level test is inline so a disabled message costs one load and one
 * branch; the arguments are not even evaluated.
 */
#define san_log_enabled(lvl) \
	__builtin_expect(__atomic_load_n(&san_log_level, __ATOMIC_RELAXED) >= (int)(lvl), 0)

#define san_log_at(lvl, ...)                       \
	do {                                       \
		if (san_log_enabled(lvl))          \
			san_log(lvl, __VA_ARGS__); \
	} while (0)

#define san_err(...) san_log_at(SAN_LOG_ERROR, __VA_ARGS__)
#define san_warn(...) san_log_at(SAN_LOG_WARN, __VA_ARGS__)
#define san_info(...) san_log_at(SAN_LOG_INFO, __VA_ARGS__)
#define san_debug(...) san_log_at(SAN_LOG_DEBUG, __VA_ARGS__)

#endif /* SAN_LOG_H */
