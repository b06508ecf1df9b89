/*
 * epoll registrations of a TCP socket made before its connect(): nginx registers an upstream
 * socket (EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP) before it connects. The connection is not
 * a candidate yet, so the registration is kept here until the connect() makes one, which takes
 * it (san_sock_on_connect): the swap must move it to X like any other (docs/engine.md §9).
 */
#ifndef SAN_EPOLL_EARLY_H
#define SAN_EPOLL_EARLY_H

#include <sys/epoll.h>

struct san_sock_epreg;

/* After a successful epoll_ctl(epfd, op, fd, ev) on a tracked, unconnected TCP socket. */
void san_ep_early_note(int epfd, int op, int fd, const struct epoll_event *ev);

/*
 * Take fd's registrations (at most max into out, the rest dropped and counted in the return
 * value): the number of registrations fd had. None are kept for fd afterwards.
 */
int san_ep_early_take(int fd, struct san_sock_epreg *out, int max);

/* fd's number is closed or reused (a new socket, a listener): its registrations go. */
void san_ep_early_forget(int fd);

/* A fork child: the lock again; the entries stay (its numbers and epoll sets are the parent's). */
void san_ep_early_atfork_child(void);

#endif
