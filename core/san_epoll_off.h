/*
 * core — epoll registrations held off the kernel: an EPOLLONESHOT registration that had fired
 * (disabled, waiting for the application's EPOLL_CTL_MOD) when the swap moved its connection's
 * number to the notification socket. The swap cannot re-create a disabled registration (an
 * EPOLL_CTL_ADD arms it, for EPOLLERR and EPOLLHUP at least), so it adds none and keeps it here;
 * the application's calls on it are answered as the kernel would answer them: its MOD adds it,
 * armed as asked; its DEL removes it; an ADD finds it there (EEXIST).
 */
#ifndef SAN_EPOLL_OFF_H
#define SAN_EPOLL_OFF_H

#include <stdbool.h>
#include <sys/epoll.h>

/* fd's registration in epfd (ev as the application asked) is disabled: keep it off the kernel. */
void san_ep_off_keep(int epfd, int fd, const struct epoll_event *ev);

/* Any registration held off (one load). */
bool san_ep_off_any(void);

/*
 * The application's epoll_ctl(epfd, op, fd, ev): true if it names a registration held off, with
 * *out the call's result (0 or -errno).
 */
bool san_ep_off_ctl(int epfd, int op, int fd, struct epoll_event *ev, int *out);

/* fd's number is closed or reused: as an epoll set (it held them) and as a registered number. */
void san_ep_off_forget(int fd);

/* close_range(): each number in [first, last]. */
void san_ep_off_forget_range(unsigned int first, unsigned int last);

/* A fork child: the lock again; the entries stay (its epoll sets are the parent's too). */
void san_ep_off_atfork_child(void);

#endif
