/* core — choosing the SAN provider of a connection (SANSWITCH_PROVIDER). */
#include <stddef.h>

#include "core/san_config.h"
#include "core/san_prov.h"
#include "proto/san_wire.h"

/*
 * The providers this build has, in the order auto tries them. shm first: a peer on this host
 * answers on its side channel at once, and one elsewhere refuses at once (no such abstract
 * name in our network namespace). The verbs provider (docs/verbs.md) is not built yet: under
 * SANSWITCH_PROVIDER=verbs no provider may carry a connection, and it stays TCP (reason
 * no_provider).
 */
static const struct san_prov_ops *const providers[] = { &san_prov_shm };

static bool allowed(const struct san_prov_ops *p)
{
	switch (san_cfg.provider) {
	case SAN_CFG_PROV_SHM:
		return p->wire == SAN_PROV_SHM;
	case SAN_CFG_PROV_VERBS:
		return p->wire == SAN_PROV_VERBS;
	default:
		return true;
	}
}

const struct san_prov_ops *san_prov_for_a(const struct san_sock *s)
{
	(void)s; /* one provider per policy today; a peer's address will pick among several */
	for (size_t i = 0; i < sizeof(providers) / sizeof(providers[0]); i++)
		if (allowed(providers[i]))
			return providers[i];
	return NULL;
}

const struct san_prov_ops *san_prov_by_wire(uint8_t wire)
{
	for (size_t i = 0; i < sizeof(providers) / sizeof(providers[0]); i++)
		if (providers[i]->wire == wire && allowed(providers[i]))
			return providers[i];
	return NULL;
}

bool san_prov_any(void)
{
	return san_prov_for_a(NULL) != NULL;
}

void san_prov_listen(int lfd)
{
	for (size_t i = 0; i < sizeof(providers) / sizeof(providers[0]); i++)
		if (allowed(providers[i]))
			(void)providers[i]->listen(lfd);
}
