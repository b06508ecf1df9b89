/*
 * core — what the kernel holds for one epoll registration: the events it is armed for, read
 * from /proc/thread-self/fdinfo/EPFD. An EPOLLONESHOT registration that has fired keeps only its
 * flags (EPOLLONESHOT, EPOLLET, EPOLLEXCLUSIVE, EPOLLWAKEUP) until the application's
 * EPOLL_CTL_MOD: the only place a process can see that a registration is disabled.
 */
#ifndef SAN_EPINFO_H
#define SAN_EPINFO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

/* The flags of a registration, as opposed to the events it waits for (the kernel's EP_PRIVATE_BITS). */
#define SAN_EPINFO_FLAGS (EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE | EPOLLWAKEUP)

/*
 * One line of an epoll set's fdinfo: true if it describes a registration ("tfd: ..."), with its
 * number, events and the inode of its file.
 */
bool san_epinfo_parse(const char *line, int *tfd, uint32_t *events, unsigned long *ino);

/*
 * The events the registration of fd (its file's inode ino) in epfd is armed for, into *events:
 * 0, -ENOENT if epfd holds none, or another -errno if the kernel could not be asked (no /proc).
 */
int san_epinfo_events(int epfd, int fd, unsigned long ino, uint32_t *events);

/* Disabled: an EPOLLONESHOT registration that fired and was not re-armed. */
static inline bool san_epinfo_disarmed(uint32_t events)
{
	return !(events & ~(uint32_t)SAN_EPINFO_FLAGS);
}

#endif
