#!/bin/bash
# t_switch_nopause — the switch-over without a pause (SANSWITCH_NOPAUSE=1 at both ends,
# docs/protocol.md §16): the call that makes a connection due sends its bytes on TCP and
# returns; the handshake runs on the engines; each direction then commits alone through the
# switch-over word of its ring, and no reader ever waits for it. Every reply's bytes checked.
#   - keep-alive connections of 400 requests of 10 bytes (shapes.py: a single-process server,
#     nginx-style workers, a child forked per connection): all switched at both ends; the due
#     request, the 17th, went on TCP (the client's tcp_tx_bytes at least 17 requests' worth:
#     the paused switch-over sends exactly 16 there), and every byte once (TCP's and the
#     SAN's add up to what was sent);
#   - 16 requests: none proposed (the policy is the same);
#   - full-duplex connections (switch_duplex.py: both ends write and read at once, 1-4 MiB
#     each way in writes of random sizes), kernel TCP the oracle: the same lines, all switched.
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
unset SANSWITCH_SWITCH_AFTER # the default policy: due at the 17th request
export SANSWITCH_STATS=1 SANSWITCH_NOPAUSE=1
CONNS=8
REQS=400
ONE=18 # bytes of one request: its 8-byte length and 10 bytes

# shellcheck source=tests/e2e/shapes_lib.sh
. "$E2E_DIR/shapes_lib.sh"

for shape in single workers fork; do
	shapes_run "$shape" pre pre "$shape" 10 "$REQS" 0
	server=listener
	case $shape in workers | fork) server=worker ;; esac
	c=$(sum "$shape" client switched)
	b=$(sum "$shape" "$server" switched)
	[ "$c" -eq "$CONNS" ] && [ "$b" -eq "$CONNS" ] ||
		fail "$shape: expected all $CONNS switched at both ends, got client $c, server $b"
	t=$(sum "$shape" client tcp_tx_bytes)
	s=$(sum "$shape" client san_tx_bytes)
	[ "$t" -ge $((CONNS * 17 * ONE)) ] ||
		fail "$shape: the due request went by the SAN (it waited for the handshake):" \
			"tcp_tx_bytes $t < $((CONNS * 17 * ONE))"
	[ $((t + s)) -eq $((CONNS * REQS * ONE)) ] ||
		fail "$shape: tcp_tx_bytes $t + san_tx_bytes $s is not the $((CONNS * REQS * ONE)) sent"
	log "$shape: all $CONNS switched at both ends, the due request on TCP" \
		"(on TCP: $((t / CONNS / ONE)) requests a connection on average)"
done

shapes_run sixteen pre pre single 10 16 0
for role in client listener; do
	[ "$(sum sixteen "$role" switched)" -eq 0 ] || fail "sixteen: the $role switched a connection of 16 requests"
done
log "16 requests: none switched"

N=8
for server in threads asyncio; do
	as_t none 120 "$PY" "$E2E_DIR/switch_duplex.py" asyncio "$server" "$N" >"$TMP/$server.none.out" \
		2>"$TMP/$server.none.err" ||
		{ show "$TMP/$server.none.out" "$TMP/$server.none.err"; fail "$server server: kernel TCP run failed"; }
	want=$(grep -v '^#' "$TMP/$server.none.out" | sort)
	out=$TMP/$server.pre
	rc=0
	as_t pre 120 "$PY" "$E2E_DIR/switch_duplex.py" asyncio "$server" "$N" >"$out.out" 2>"$out.err" || rc=$?
	no_preload_errors "$out.err"
	got=$(grep -v '^#' "$out.out" | sort)
	if [ "$rc" -ne 0 ] || [ "$got" != "$want" ]; then
		show "$out.out" "$out.err"
		diff <(echo "$want") <(echo "$got") >&2 || true
		fail "$server server: the switched run differs from kernel TCP's (exit $rc)"
	fi
	pids_switched "$out.out" "$out.err" "$N" "$server server"
	log "asyncio client, $server echo server: $N full-duplex connections as kernel TCP, all switched"
done
