/*
 * epoll registrations of TCP sockets made before they connected (san_epoll_early.h).
 *
 * A plain list under one lock: an entry lives from the registration to the connect() that
 * follows it (nginx: microseconds), so it holds about as many entries as connects are under
 * way. A number closed without our wrapper seeing it (a raw syscall) leaves its entry until
 * the number is a socket again (san_track_socket forgets it). The list's length is read
 * without the lock, so that closes and connects with nothing registered early cost one load.
 */
#include "core/san_epoll_early.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/san_sock.h"

struct early_reg {
	int epfd, fd;
	struct epoll_event ev;
};

static pthread_mutex_t early_lock = PTHREAD_MUTEX_INITIALIZER;
static struct early_reg *early;
static int n_early, cap_early;

static int find(int epfd, int fd)
{
	for (int i = 0; i < n_early; i++)
		if (early[i].epfd == epfd && early[i].fd == fd)
			return i;
	return -1;
}

static void drop(int i)
{
	early[i] = early[n_early - 1];
	__atomic_store_n(&n_early, n_early - 1, __ATOMIC_RELAXED);
}

void san_ep_early_note(int epfd, int op, int fd, const struct epoll_event *ev)
{
	int i;

	pthread_mutex_lock(&early_lock);
	i = find(epfd, fd);
	if (op == EPOLL_CTL_DEL) {
		if (i >= 0)
			drop(i);
	} else if (ev && i >= 0) {
		early[i].ev = *ev;
	} else if (ev) {
		if (n_early == cap_early) {
			int cap = cap_early ? 2 * cap_early : 16;
			struct early_reg *e = realloc(early, (size_t)cap * sizeof(*e));

			if (!e) {
				/* the connection will still work; its waits may not see the SAN */
				pthread_mutex_unlock(&early_lock);
				return;
			}
			early = e;
			cap_early = cap;
		}
		early[n_early] = (struct early_reg){ epfd, fd, *ev };
		__atomic_store_n(&n_early, n_early + 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&early_lock);
}

int san_ep_early_take(int fd, struct san_sock_epreg *out, int max)
{
	int n = 0;

	if (!__atomic_load_n(&n_early, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&early_lock);
	for (int i = 0; i < n_early;) {
		if (early[i].fd != fd) {
			i++;
			continue;
		}
		if (n < max)
			out[n] = (struct san_sock_epreg){ early[i].epfd, fd, early[i].ev };
		n++;
		drop(i);
	}
	pthread_mutex_unlock(&early_lock);
	return n;
}

void san_ep_early_forget(int fd)
{
	if (__atomic_load_n(&n_early, __ATOMIC_RELAXED))
		(void)san_ep_early_take(fd, NULL, 0);
}

void san_ep_early_atfork_child(void)
{
	pthread_mutex_init(&early_lock, NULL);
}
