/* core — the log file (SANSWITCH_LOG_FILE): its name, opened at the first line, kept ours. */
#ifndef SAN_LOGFILE_H
#define SAN_LOGFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * The file's name: @pattern with every "%p" replaced by @pid and "%%" by "%" (any other '%'
 * stays as it is). 0, or -ENAMETOOLONG if it does not fit @size bytes with its NUL.
 */
int san_logfile_expand(const char *pattern, pid_t pid, char *out, size_t size);

/* Does @pattern name one file per process ("%p" in it)? */
bool san_logfile_per_process(const char *pattern);

/*
 * Log to the file @pattern names (NULL or "": no file, lines go to stderr). Nothing is opened
 * yet: a process that never logs makes no file. A file this module had open before is closed.
 */
void san_logfile_init(const char *pattern);

/*
 * The fd a line goes to: the file, opened now if it is not yet (append, close-on-exec, mode
 * 0600), or opened again if the program closed our fd or put something else on its number; -1
 * for stderr: no file, its open failed, or another thread is opening it this moment (no one
 * waits: a signal handler may have interrupted the opener). When this very call failed to open
 * it, *@open_err is the errno, or SAN_LOGFILE_IS_STDOUT, once in the process's life; otherwise
 * it is left alone.
 */
int san_logfile_fd(int *open_err);

/* The file is the program's standard output (/dev/stdout, or the file it goes to): not used. */
#define SAN_LOGFILE_IS_STDOUT 100000

/* The name being logged to (expanded for this process), or NULL when there is no file. */
const char *san_logfile_pattern(void);

/* fork() child: with "%p", the child's lines go to a file of its own, opened at its first. */
void san_logfile_atfork_child(void);

/*
 * A seccomp filter is about to be installed: from here on no system call but write() is made
 * for the file (no open, no fstat: the filter may refuse them). The caller opens it first.
 */
void san_logfile_sandbox(void);

#endif /* SAN_LOGFILE_H */
