/*
 * core — what this process registered in its epoll sets for connections the library manages,
 * as the application asked (events, data), so that a wait can find their readiness in their
 * rings without asking the kernel (core/san_rxwatch.h, preload/san_wait.c).
 *
 * Only what goes through our epoll_ctl is seen. The copy is used only where it cannot lie
 * about what the kernel holds: a set whose number was closed is forgotten, a number closed
 * leaves every set, a set with a second number (a dup) is not used, and a fork child does not
 * use the copies it inherited (it shares the kernel's sets with its parent, which may change
 * them behind its back).
 */
#ifndef SAN_EPSHADOW_H
#define SAN_EPSHADOW_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct san_epshadow_ent {
	int fd;
	struct epoll_event ev; /* as the application asked */
	bool edge; /* (san_epshadow_watch_in) an EPOLLET registration, the fd's only one */
};

/* After a successful epoll_ctl(epfd, op, fd, ev) of a managed fd, or of a socket not yet
 * connected (or any DEL). */
void san_epshadow_ctl(int epfd, int op, int fd, const struct epoll_event *ev);

/* epoll_create made epfd (a dup of it, san_epshadow_dup, may come before its first copy). */
void san_epshadow_created(int epfd);

/*
 * dup(), dup2(), dup3(), F_DUPFD: if oldfd is an epoll set, the set has two numbers, and a change
 * through one would leave the other's copy wrong: neither copy is used from now on (the kernel's
 * path), until the number is closed.
 */
void san_epshadow_dup(int oldfd, int newfd);

/* fd's number is closed (or reused): as an epoll set, and as a member of every set. */
void san_epshadow_forget(int fd);

/* close_range(): each number in [first, last]. */
void san_epshadow_forget_range(unsigned int first, unsigned int last);

/*
 * The level-triggered registrations of epfd that ask for input (EPOLLIN, no EPOLLET,
 * EPOLLONESHOT nor EPOLLEXCLUSIVE): at most max into out. -1 when epfd has no usable copy
 * (none, or inherited through a fork); else how many (0..max), or max + 1 if there are more
 * (the caller then keeps the kernel's path).
 */
int san_epshadow_level_in(int epfd, struct san_epshadow_ent *out, int max);

/*
 * What a wait over epfd may watch in the rings: the level-triggered input registrations (as
 * san_epshadow_level_in), and the edge-triggered ones (EPOLLET without EPOLLONESHOT nor
 * EPOLLEXCLUSIVE) of fds registered in no other set of this process, while no copy here is
 * inherited or untrusted (a set this process cannot see might hold the fd edge-triggered and
 * need a doorbell per arrival): edge set. Returns as san_epshadow_level_in. Registrations of
 * sockets not yet connected count too (san_epshadow_ctl is told of them: they move to the
 * connection the connect makes).
 */
int san_epshadow_watch_in(int epfd, struct san_epshadow_ent *out, int max);

/* Any copy at all (one load). */
bool san_epshadow_any(void);

/* A fork child: the copies inherited are not used. */
void san_epshadow_atfork_child(void);

#endif
