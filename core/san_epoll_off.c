/*
 * core — epoll registrations held off the kernel (san_epoll_off.h).
 *
 * A plain list under one lock: an entry lives from a swap that found its EPOLLONESHOT
 * registration fired to the application's next epoll_ctl on it (a server re-arms the
 * connection once it has handled its input: microseconds to seconds), so it holds a few at most.
 * Its length is read without the lock, so that an epoll_ctl or a close with none held costs one
 * load.
 */
#include "core/san_epoll_off.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/san_sys.h"

struct off_reg {
	int epfd, fd;
	struct epoll_event ev;
};

static pthread_mutex_t off_lock = PTHREAD_MUTEX_INITIALIZER;
static struct off_reg *off;
static int n_off, cap_off;

static int find(int epfd, int fd)
{
	for (int i = 0; i < n_off; i++)
		if (off[i].epfd == epfd && off[i].fd == fd)
			return i;
	return -1;
}

static void drop(int i)
{
	off[i] = off[n_off - 1];
	__atomic_store_n(&n_off, n_off - 1, __ATOMIC_RELAXED);
}

bool san_ep_off_any(void)
{
	return __atomic_load_n(&n_off, __ATOMIC_RELAXED) != 0;
}

void san_ep_off_keep(int epfd, int fd, const struct epoll_event *ev)
{
	pthread_mutex_lock(&off_lock);
	if (find(epfd, fd) < 0) {
		if (n_off == cap_off) {
			int cap = cap_off ? 2 * cap_off : 8;
			struct off_reg *v = realloc(off, (size_t)cap * sizeof(*v));

			if (!v) {
				/* not kept: the application's MOD then fails (ENOENT), as for a lost set */
				pthread_mutex_unlock(&off_lock);
				return;
			}
			off = v;
			cap_off = cap;
		}
		off[n_off] = (struct off_reg){ epfd, fd, *ev };
		__atomic_store_n(&n_off, n_off + 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&off_lock);
}

bool san_ep_off_ctl(int epfd, int op, int fd, struct epoll_event *ev, int *out)
{
	int i;

	if (!san_ep_off_any())
		return false;
	pthread_mutex_lock(&off_lock);
	if ((i = find(epfd, fd)) < 0) {
		pthread_mutex_unlock(&off_lock);
		return false;
	}
	switch (op) {
	case EPOLL_CTL_MOD:
		/* the re-arm: now the kernel's, as asked (another process of a fork may have added
		 * it to the set they share already) */
		*out = san_sys_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, ev);
		if (*out == -EEXIST)
			*out = san_sys_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, ev);
		if (*out != -EINVAL && *out != -EFAULT)
			drop(i); /* (EBADF, ENOENT: the number or the set is gone, so is it) */
		break;
	case EPOLL_CTL_DEL:
		*out = 0;
		drop(i);
		break;
	default:
		*out = -EEXIST;
		break;
	}
	pthread_mutex_unlock(&off_lock);
	return true;
}

void san_ep_off_forget_range(unsigned int first, unsigned int last)
{
	if (!san_ep_off_any())
		return;
	pthread_mutex_lock(&off_lock);
	for (int i = 0; i < n_off;)
		if (((unsigned int)off[i].epfd >= first && (unsigned int)off[i].epfd <= last) ||
		    ((unsigned int)off[i].fd >= first && (unsigned int)off[i].fd <= last))
			drop(i);
		else
			i++;
	pthread_mutex_unlock(&off_lock);
}

void san_ep_off_forget(int fd)
{
	if (fd >= 0)
		san_ep_off_forget_range((unsigned int)fd, (unsigned int)fd);
}

void san_ep_off_atfork_child(void)
{
	pthread_mutex_init(&off_lock, NULL);
}
