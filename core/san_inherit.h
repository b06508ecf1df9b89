/* core — TCP connections a process was handed at exec, found once at load. */
#ifndef SAN_INHERIT_H
#define SAN_INHERIT_H

/*
 * Every established TCP connection open in this process when the library loads came through
 * exec: the program never made or accepted it under our wrappers (inetd's dup2 onto 0 and 1,
 * a forking server's exec'd child, socat's EXEC with nofork, a shell's redirection). Each one
 * becomes a candidate named by all its numbers (san_sock_adopt). Listeners are left for their
 * first accept() (preload/san_track.c). Costs one read of /proc/self/fd and a getsockopt per open
 * fd (a few more calls per TCP socket); nothing without /proc. More sockets than it can follow:
 * none is adopted.
 */
void san_inherit_scan(void);

#endif /* SAN_INHERIT_H */
