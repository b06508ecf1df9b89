/* core — choosing the SAN provider of a connection (SANSWITCH_PROVIDER). */
#include <stddef.h>

#include "core/san_config.h"
#include "core/san_prov.h"
#include "proto/san_wire.h"

/*
 * The providers this build has, in the order auto tries them. shm first: a peer on this host
 * answers on its side channel at once, and one elsewhere refuses at once (no such abstract
 * name in our network namespace), so A goes on to verbs only for a peer that is not here
 * (docs/verbs.md §2). A build without the rdma-core headers has no verbs provider: its entry
 * is a weak reference, NULL there.
 */
extern const struct san_prov_ops san_prov_verbs __attribute__((weak));
static const struct san_prov_ops *const providers[] = { &san_prov_shm, &san_prov_verbs };
#define NPROV (sizeof(providers) / sizeof(providers[0]))

/* Also false for a provider this build does not link (the unit runner has no verbs). */
static bool allowed(const struct san_prov_ops *p)
{
	if (!p)
		return false;
	switch (san_cfg.provider) {
	case SAN_CFG_PROV_SHM:
		return p->wire == SAN_PROV_SHM;
	case SAN_CFG_PROV_VERBS:
		return p->wire == SAN_PROV_VERBS;
	case SAN_CFG_PROV_NONE:
		return false;
	default:
		return true;
	}
}

const struct san_prov_ops *san_prov_for_a(const struct san_prov_ops *prev)
{
	size_t i = 0;

	if (prev)
		while (i < NPROV && providers[i++] != prev)
			;
	for (; i < NPROV; i++)
		if (allowed(providers[i]))
			return providers[i];
	return NULL;
}

const struct san_prov_ops *san_prov_by_wire(uint8_t wire)
{
	for (size_t i = 0; i < NPROV; i++)
		if (allowed(providers[i]) && providers[i]->wire == wire)
			return providers[i];
	return NULL;
}

bool san_prov_any(void)
{
	return san_prov_for_a(NULL) != NULL;
}

bool san_prov_remote(void)
{
	for (size_t i = 0; i < NPROV; i++)
		if (allowed(providers[i]) && providers[i]->wire != SAN_PROV_SHM &&
		    !(providers[i]->absent && providers[i]->absent()))
			return true;
	return false;
}

void san_prov_listen(int lfd)
{
	for (size_t i = 0; i < NPROV; i++)
		if (allowed(providers[i]))
			(void)providers[i]->listen(lfd);
}

void san_prov_unlisten(int lfd)
{
	for (size_t i = 0; i < NPROV; i++)
		if (providers[i])
			providers[i]->unlisten(lfd);
}

void san_prov_name_conn(struct san_sock *s)
{
	for (size_t i = 0; i < NPROV; i++)
		if (allowed(providers[i]) && providers[i]->name_conn)
			providers[i]->name_conn(s);
}

void san_prov_verbs_spin(void) __attribute__((weak));
bool san_prov_verbs_sleep(bool begin) __attribute__((weak));
void san_prov_verbs_exit(void) __attribute__((weak));
void san_prov_verbs_exec(void) __attribute__((weak));
bool san_prov_verbs_exec_wanted(void) __attribute__((weak));

void san_prov_exit(void)
{
	if (san_prov_verbs_exit)
		san_prov_verbs_exit();
}

bool san_prov_exec_wanted(void)
{
	return san_prov_verbs_exec_wanted && san_prov_verbs_exec_wanted();
}

void san_prov_exec(void)
{
	if (san_prov_verbs_exec)
		san_prov_verbs_exec();
}

void san_prov_spin(void)
{
	if (san_prov_verbs_spin)
		san_prov_verbs_spin();
}

bool san_prov_sleep_begin(void)
{
	return san_prov_verbs_sleep && san_prov_verbs_sleep(true);
}

void san_prov_sleep_end(bool counted)
{
	if (counted)
		(void)san_prov_verbs_sleep(false);
}

void san_prov_sleep_done(void *counted)
{
	san_prov_sleep_end(*(bool *)counted);
}

void san_prov_atfork_child(void)
{
	for (size_t i = 0; i < NPROV; i++)
		if (providers[i])
			providers[i]->atfork_child();
}
