/* core — will an exec find a program to run? (san_core_before_exec asks before what only an
 * exec that replaces the image may do). */
#ifndef SAN_EXECPATH_H
#define SAN_EXECPATH_H

#include <stdbool.h>

/*
 * True when file names a regular file this process may execute: as given, or (search, and no
 * '/' in it) in a directory of path_env (PATH; NULL: glibc's default "/bin:/usr/bin"; an
 * empty entry is the current directory), as execvp looks. Only what the kernel checks first:
 * an exec that fails later (a bad ELF header, E2BIG) is not foreseen. No allocation, no lock:
 * a vfork child runs it too.
 */
bool san_exec_may_run(const char *file, bool search, const char *path_env);

#endif /* SAN_EXECPATH_H */
