/* core — rdma-core loaded at first need: libibverbs' and librdmacm's functions in one table. */
#ifndef SAN_RDMA_SYMS_H
#define SAN_RDMA_SYMS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/*
 * libsanswitch.so does not link rdma-core: a process that never needs the verbs provider, or
 * runs on a host without an RDMA device, never maps libibverbs, librdmacm or their dependencies
 * (about 0.3 ms of every preloaded process's start: docs/behaviour.md, "Start-up"). The verbs transport
 * (core/san_verbs.c) calls every exported rdma-core function through san_rdma, which
 * san_rdma_load() fills by dlopen + dlvsym at the first listener, connect or port query. The
 * functions that <infiniband/verbs.h> defines inline (ibv_post_send, ibv_post_recv,
 * ibv_poll_cq, ibv_req_notify_cq: calls through the context's ops; rdma_get_peer_addr and
 * rdma_get_local_addr in <rdma/rdma_cma.h>) need no entry and are called as they are.
 *
 * Each entry names the symbol version a program linked against these headers binds (objdump -T
 * of a library linked with -libverbs -lrdmacm): the default version of each symbol, the one
 * whose prototype the headers declare (ibv_get_device_name has an IBVERBS_1.0 variant too, and
 * rdma-core keeps the old ones for old binaries). ibv_reg_mr and ibv_query_port are also macros
 * of verbs.h (inline wrappers that choose between exported variants): their entries are the
 * plain IBVERBS_1.1 functions, and a call through the table must keep the macro from expanding:
 * (san_rdma.ibv_reg_mr)(...).
 */
#define SAN_RDMA_IBV_SYMS(X)                       \
	X(ibv_ack_cq_events, "IBVERBS_1.1")        \
	X(ibv_alloc_pd, "IBVERBS_1.1")             \
	X(ibv_create_comp_channel, "IBVERBS_1.0")  \
	X(ibv_create_cq, "IBVERBS_1.1")            \
	X(ibv_dealloc_pd, "IBVERBS_1.1")           \
	X(ibv_dereg_mr, "IBVERBS_1.1")             \
	X(ibv_destroy_comp_channel, "IBVERBS_1.0") \
	X(ibv_destroy_cq, "IBVERBS_1.1")           \
	X(ibv_get_cq_event, "IBVERBS_1.1")         \
	X(ibv_get_device_name, "IBVERBS_1.1")      \
	X(ibv_is_fork_initialized, "IBVERBS_1.13") \
	X(ibv_modify_qp, "IBVERBS_1.1")            \
	X(ibv_open_device, "IBVERBS_1.1")          \
	X(ibv_query_device, "IBVERBS_1.1")         \
	X(ibv_query_port, "IBVERBS_1.1")           \
	X(ibv_reg_mr, "IBVERBS_1.1")               \
	X(ibv_wc_status_str, "IBVERBS_1.1")

#define SAN_RDMA_CM_SYMS(X)                         \
	X(rdma_accept, "RDMACM_1.0")                \
	X(rdma_ack_cm_event, "RDMACM_1.0")          \
	X(rdma_bind_addr, "RDMACM_1.0")             \
	X(rdma_connect, "RDMACM_1.0")               \
	X(rdma_create_event_channel, "RDMACM_1.0")  \
	X(rdma_create_id, "RDMACM_1.0")             \
	X(rdma_create_qp, "RDMACM_1.0")             \
	X(rdma_destroy_event_channel, "RDMACM_1.0") \
	X(rdma_destroy_id, "RDMACM_1.0")            \
	X(rdma_destroy_qp, "RDMACM_1.0")            \
	X(rdma_disconnect, "RDMACM_1.0")            \
	X(rdma_event_str, "RDMACM_1.0")             \
	X(rdma_get_cm_event, "RDMACM_1.0")          \
	X(rdma_get_devices, "RDMACM_1.0")           \
	X(rdma_listen, "RDMACM_1.0")                \
	X(rdma_migrate_id, "RDMACM_1.0")            \
	X(rdma_reject, "RDMACM_1.0")                \
	X(rdma_resolve_addr, "RDMACM_1.0")          \
	X(rdma_resolve_route, "RDMACM_1.0")

/* One pointer per function, of the type the header declares it with. */
#define SAN_RDMA_MEMBER(name, version) __typeof__(name) *name;
struct san_rdma_syms {
	SAN_RDMA_IBV_SYMS(SAN_RDMA_MEMBER)
	SAN_RDMA_CM_SYMS(SAN_RDMA_MEMBER)
};
#undef SAN_RDMA_MEMBER

/*
 * Was rdma-core loaded by another process, an ancestor before a fork()? Its device contexts,
 * which librdmacm opens once and keeps, may then be that process's (san_verbs.c, own_ctx).
 */
bool san_rdma_inherited(void);

/* Filled by the first successful san_rdma_load(); read-only after it. */
extern struct san_rdma_syms san_rdma;

/*
 * Make san_rdma usable: 0, or -ENODEV when it never will be in this process -- no RDMA device
 * can be there (<sysfs>/class/infiniband has no entry, sysfs being $SYSFS_PATH or /sys as for
 * rdma-core; a host without sysfs is left for rdma-core itself to judge), or libibverbs.so.1 /
 * librdmacm.so.1 or one of the functions cannot be loaded (rdma-core missing or too old: an
 * info line says which). Decided once per process, by the first caller (any thread); later
 * calls cost one load. The preload's callers hold san_fd_guard_enter() around it, as around
 * any rdma-core call: the libraries' constructors run in here, and their fds are not ours.
 */
int san_rdma_load(void);

#endif /* SAN_RDMA_SYMS_H */
