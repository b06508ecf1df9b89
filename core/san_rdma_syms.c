/* core — rdma-core loaded at first need: dlopen + dlvsym of libibverbs and librdmacm. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/san_log.h"
#include "core/san_rdma_syms.h"

struct san_rdma_syms san_rdma;

static int load_rc = -ENODEV;

/*
 * Can an RDMA device be here? rdma-core lists a device only if <sysfs>/class/infiniband/<name>
 * exists (libibverbs' enumeration, by netlink or from class/infiniband_verbs, skips any
 * other), with sysfs at $SYSFS_PATH when the process is not set-uid, else /sys, as
 * ibv_get_sysfs_path() has it. So no entry there (or no such directory: ib_core not loaded)
 * means no device; only a host without sysfs at all cannot tell, and rdma-core decides.
 */
static bool device_may_exist(const char **why)
{
	const char *sys = getuid() == geteuid() ? getenv("SYSFS_PATH") : NULL;
	char path[512];
	struct dirent *e;
	bool any = false;
	DIR *d;

	if (!sys || !*sys)
		sys = "/sys";
	snprintf(path, sizeof(path), "%s/class/infiniband", sys);
	d = opendir(path);
	if (!d) {
		snprintf(path, sizeof(path), "%s/class", sys);
		*why = "no RDMA device (no class/infiniband in sysfs)";
		return access(path, F_OK) != 0;
	}
	while (!any && (e = readdir(d)))
		any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	*why = "no RDMA device (class/infiniband in sysfs is empty)";
	return any;
}

/* One entry of san_rdma from the handle h; a symbol not there: *missing names it, false. */
#define SAN_RDMA_GET(name, version)                                             \
	if (!(san_rdma.name = (__typeof__(name) *)dlvsym(h, #name, version))) { \
		*missing = #name "@" version;                                   \
		return false;                                                   \
	}

static bool get_ibv(void *h, const char **missing)
{
	SAN_RDMA_IBV_SYMS(SAN_RDMA_GET)
	return true;
}

static bool get_cm(void *h, const char **missing)
{
	SAN_RDMA_CM_SYMS(SAN_RDMA_GET)
	return true;
}
#undef SAN_RDMA_GET

static pid_t load_pid; /* the process that loaded it */

static void load_once(void)
{
	const char *why = NULL, *missing = NULL;
	void *ibv, *cm;

	if (!device_may_exist(&why)) {
		san_debug("verbs: %s: rdma-core not loaded", why);
		return;
	}
	/*
	 * Never closed: rdma-core keeps its devices open for the process's life once used, and
	 * its providers (librxe, libmlx5...) are loaded by libibverbs itself. RTLD_LOCAL: nothing
	 * of it joins the application's global scope, so the program's own symbols resolve as
	 * they did before the preload.
	 */
	ibv = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	cm = ibv ? dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!ibv || !cm) {
		san_info("verbs: an RDMA device may be here but rdma-core cannot be loaded (%s): "
			 "connections stay off verbs",
			 dlerror());
		memset(&san_rdma, 0, sizeof(san_rdma));
		return;
	}
	if (!get_ibv(ibv, &missing) || !get_cm(cm, &missing)) {
		san_info("verbs: rdma-core lacks %s (too old?): connections stay off verbs",
			 missing);
		memset(&san_rdma, 0, sizeof(san_rdma));
		return;
	}
	san_debug("verbs: rdma-core loaded (libibverbs.so.1, librdmacm.so.1)");
	load_pid = getpid();
	load_rc = 0;
}

bool san_rdma_inherited(void)
{
	return load_rc == 0 && load_pid != getpid();
}

int san_rdma_load(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load_once);
	return load_rc;
}
