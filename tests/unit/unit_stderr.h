/* tests/unit: what a call printed on stderr (warnings, the stats line), shared by the suites. */
#ifndef SAN_UNIT_STDERR_H
#define SAN_UNIT_STDERR_H

/* Run fn() with stderr going to a temporary file; returns what was written (a static buffer). */
char *unit_stderr_of(void (*fn)(void));

/* The number of lines (newlines) in s. */
int unit_count_lines(const char *s);

#endif /* SAN_UNIT_STDERR_H */
