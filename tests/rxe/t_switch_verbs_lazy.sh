#!/bin/bash
# t_switch_verbs_lazy — rdma-core is loaded when the verbs provider needs it, and only then
# (core/san_rdma_syms.c; the library does not link it): with the rxe device here, a preloaded
# process that uses no socket, or whose policy leaves verbs out (SANSWITCH_PROVIDER=shm, none),
# never maps libibverbs or librdmacm, even when it listens and connects; one under auto maps both
# once it listens. A server under the default policy (auto), which loaded rdma-core at its
# listen(), accepts a verbs client's connections onto verbs: switched_verbs on both sides, the
# bytes verified (tests/e2e/t_symbols.sh checks the host without a device).
# timeout: 300
set -u
# shellcheck source=tests/rxe/switch_lib.sh
. "$(dirname -- "$0")/switch_lib.sh"

devs=(/sys/class/infiniband/*)
[ -e "${devs[0]}" ] || fail "no device in /sys/class/infiniband"

# rdma_maps PROVIDER [ARGS] — tests/e2e/rdma_maps.py ARGS preloaded under that policy.
rdma_maps() {
	local p=$1
	shift
	preload env SANSWITCH_PROVIDER="$p" SANSWITCH_LOG=debug "$PY" "$E2E_DIR/rdma_maps.py" "$@" \
		2>"$TMP/rdma.$p.err" || { show "$TMP/rdma.$p.err"; fail "rdma_maps.py under $p failed"; }
}

got=$(rdma_maps auto --idle) || exit 1
[ "$got" = none ] || fail "a preloaded process that uses no socket maps $got"
for p in shm none; do
	got=$(rdma_maps "$p" "$addr") || exit 1
	[ "$got" = none ] || { show "$TMP/rdma.$p.err"; fail "SANSWITCH_PROVIDER=$p: maps $got"; }
done
got=$(rdma_maps auto "$addr") || exit 1
[ "$got" = "libibverbs librdmacm" ] ||
	{ show "$TMP/rdma.auto.err"; fail "SANSWITCH_PROVIDER=auto: a listener on $addr maps '$got'"; }
log "rdma-core mapped only by the process that may use verbs (idle, shm, none: none; auto: $got)"

# The server under auto, the client forced onto verbs (both in this guest: under auto alone
# shm would carry it).
export SANSWITCH_BULK=auto
vpair lazy.kernel none none 2 -a "$addr" -- -a "$addr" -b 1M -s 41
kcrc=$VCRC
SANSWITCH_PROVIDER=auto
start_server lazy.srv pre --conns-total 2 -t 60 -a "$addr"
grep -q 'libibverbs' "/proc/$SERVER_PID/maps" ||
	fail "the listening server (auto) does not map libibverbs"
SANSWITCH_PROVIDER=verbs
rc=0
as_t pre 90 "$SANVERIFY" client -p "$SERVER_PORT" -c 2 -t 60 -a "$addr" -b 1M -s 41 \
	>"$TMP/lazy.cli.out" 2>"$TMP/lazy.cli.err" || rc=$?
wait_pid "$SERVER_PID" 30 || rc=$?
no_preload_errors "$TMP/lazy.cli.err" "$TMP/lazy.srv.err"
if [ "$rc" -ne 0 ]; then
	show "$TMP/lazy.cli.out" "$TMP/lazy.cli.err" "$TMP/lazy.srv.out" "$TMP/lazy.srv.err"
	fail "lazy: exit $rc"
fi
line=$(grep '^sanverify: client ok ' "$TMP/lazy.cli.out") ||
	{ show "$TMP/lazy.cli.out"; fail "lazy: no 'client ok' line"; }
[[ $line =~ crc32=([0-9A-Fa-f]{8}) ]] || fail "lazy: cannot parse '$line'"
[ "${BASH_REMATCH[1]}" = "$kcrc" ] || fail "lazy: '$line', kernel-only crc32 $kcrc"
for side in srv cli; do
	l=$(stats_line "$TMP/lazy.$side.err") || exit 1
	if [ "$(field "$l" switched_verbs)" -ne 2 ] || [ "$(field "$l" fallback)" -ne 0 ]; then
		fail "lazy: $side not switched onto verbs: $l"
	fi
	log "lazy.$side: $l"
done
log "a server under auto loaded rdma-core at its listener and switched both connections onto verbs"
