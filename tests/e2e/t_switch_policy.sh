#!/bin/bash
# t_switch_policy — when a connection is proposed (docs/protocol.md §9.7), both ends preloaded,
# shapes.py's single-process server and its client, every reply's bytes checked. The counts are
# exact, so the test needs no timing: the client's tcp_tx_bytes say which requests went over TCP.
#   - one request per connection (the connection-rate loop): nothing switches, at either end;
#   - sixteen requests (a short request/reply connection): nothing switches either;
#   - eighteen requests: the first sixteen over TCP (18 bytes each: an 8-byte length and 10
#     bytes), the 17th and 18th over the SAN;
#   - twenty requests, each end's first look at the kernel's counts finding them moving
#     (SANSWITCH_FAULT=counts_busy): the first eighteen over TCP, the rest over the SAN;
#   - a server that answers after the client gave up (SANSWITCH_FAULT=accept_late): switched
#     at the client's third try;
#   - SANSWITCH_SWITCH_AFTER=2: the first two over TCP; =0: none (proposed before any byte);
#   - one 1 MiB request in 64 KiB sends: due after 256 KiB moved (the length and 4 pieces over
#     TCP), proposed at the first send that finds TCP's buffer full, else at the receive of the
#     reply; in one send: proposed at the next call;
#   - a client proposing after the server's window closed (its own SANSWITCH_SWITCH_AFTER=24):
#     refused STATE, not NOT_OWNER, where the server's candidates are socks (SANSWITCH_LITE=0);
#     switched where they are lite (the default: their window ends with its time only);
#   - a client proposing earlier than the server's policy (its own SANSWITCH_SWITCH_AFTER=1):
#     refused BUSY once (the server's receive in the kernel), switched at its 3rd request;
#   - a client that acknowledges each piece of one reply (pieces.py): switched;
#   - an upload refused once in a send (counts_busy), then half-closed before it reads
#     (upload_eof.py): switched at the shutdown;
#   - one end preloaded, the other not (either way): bytes checked, nothing switched, no stall.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
unset SANSWITCH_SWITCH_AFTER # the default policy is the subject
export SANSWITCH_STATS=1
CONNS=8

# shellcheck source=tests/e2e/shapes_lib.sh
. "$E2E_DIR/shapes_lib.sh"

# run NAME SRVMODE CLIMODE SIZE REQS [ENV...] — one single-process server, CONNS connections; sets
# CL, SL (the client's and the server's stats lines, empty for a side not preloaded). CHUNK: see
# shapes.py.
CHUNK=0
run() {
	local name=$1 sm=$2 cm=$3 pid
	shapes_run "$name" "$sm" "$cm" single "$4" "$5" "$CHUNK" "${@:6}"
	CL='' SL=''
	if [ "$cm" = pre ]; then
		pid=$(sed -n 's/^# pid \([0-9]*\) client$/\1/p' "$TMP/$name.cli.out")
		CL=$(pid_line "$TMP/$name.cli.err" "$pid") || exit 1
	fi
	if [ "$sm" = pre ]; then
		pid=$(sed -n 's/^# pid \([0-9]*\) listener$/\1/p' "$TMP/$name.srv.out")
		SL=$(pid_line "$TMP/$name.srv.err" "$pid") || exit 1
	fi
}

expect() { # NAME LINE FIELD VALUE
	[ "$(field "$2" "$3")" -eq "$4" ] || fail "$1: expected $3=$4: $2"
}

run short pre pre 10 1
for l in "$CL" "$SL"; do
	expect short "$l" switched 0
	expect short "$l" fallback_not_attempted "$CONNS"
done
log "one request per connection: none of $CONNS proposed, at either end"

# The default SANSWITCH_SWITCH_AFTER, 16: a switch costs more than 16 exchanges over TCP gain
# back (docs/protocol.md §9.7), so a connection proposes at the send that begins its 17th.
run sixteen pre pre 10 16
for l in "$CL" "$SL"; do
	expect sixteen "$l" switched 0
	expect sixteen "$l" fallback_not_attempted "$CONNS"
done
expect sixteen "$CL" tcp_tx_bytes $((CONNS * 16 * 18))
log "sixteen requests per connection: none of $CONNS proposed, all on TCP"

run keep pre pre 10 18
for l in "$CL" "$SL"; do expect keep "$l" switched "$CONNS"; done
expect keep "$CL" tcp_tx_bytes $((CONNS * 16 * 18))
expect keep "$CL" san_tx_bytes $((CONNS * 2 * 18))
expect keep "$SL" tcp_tx_bytes $((CONNS * 16 * 10))
log "eighteen requests: all $CONNS switched, the first sixteen over TCP, the others over the SAN"

# A stream in full flow can keep the kernel's counts unreadable (core/san_forked.c): "not now",
# never "stays TCP". counts_busy makes each end's first look find them moving: A's, at its 17th
# request (it proposes at its 18th instead), then B's, at that PROPOSE (BUSY: A proposes again at
# its 19th). Before, A's unreadable counts kept the connection on TCP for good.
run busy pre pre 10 20 SANSWITCH_FAULT=counts_busy
for l in "$CL" "$SL"; do expect busy "$l" switched "$CONNS"; done
expect busy "$CL" tcp_tx_bytes $((CONNS * 18 * 18))
expect busy "$CL" san_tx_bytes $((CONNS * 2 * 18))
log "counts unreadable at the first look of each end: all $CONNS switched two requests later"

# A client that gives up on the server's answer (SANSWITCH_FAULT=accept_late: for a PROPOSE the
# client will repeat, the server holds its answer until the client has given up, in turn before
# it looks at the PROPOSE and once it has prepared its answer, or answers at once and the
# client's engine ignores the ACCEPT, as if its timer had fired first): the first two tries, at
# the 17th and 18th requests, time out at the client; the third, its last, is answered at once.
# The server must see that the client has gone and refuse, or undo its preparation when its
# answer cannot go or the client's ABORT comes first, so that the connection stays a candidate.
# Before, each left it on TCP for good (the third try refused STATE: none of 8 switched).
run late_answer pre pre 10 21 SANSWITCH_FAULT=accept_late SANSWITCH_LOG=debug SANSWITCH_LOG_RATE=0
for l in "$CL" "$SL"; do expect late_answer "$l" switched "$CONNS"; done
expect late_answer "$CL" tcp_tx_bytes $((CONNS * 18 * 18))
expect late_answer "$CL" san_tx_bytes $((CONNS * 3 * 18))
# the 2 x CONNS timed-out tries take the three ways in turn (the connections one after another)
n=$((2 * CONNS))
n1=$(grep -c 'PROPOSE refused (timeout)' "$TMP/late_answer.srv.err")
n2=$(grep -c 'gave up on our answer (our ACCEPT did not go): a candidate again' "$TMP/late_answer.srv.err")
n3=$(grep -c 'gave up on our answer (its ABORT came first): a candidate again' "$TMP/late_answer.srv.err")
[ "$n1" -eq $(((n + 2) / 3)) ] && [ "$n2" -eq $(((n + 1) / 3)) ] && [ "$n3" -eq $((n / 3)) ] ||
	fail "late_answer: expected $(((n + 2) / 3)) refused, $(((n + 1) / 3)) undone as the ACCEPT failed" \
		"and $((n / 3)) as the ABORT came; saw $n1, $n2, $n3"
log "a client giving up on the server's answer twice, each of three ways: all $CONNS switched at the third try"

run after2 pre pre 10 3 SANSWITCH_SWITCH_AFTER=2
expect after2 "$CL" switched "$CONNS"
expect after2 "$CL" tcp_tx_bytes $((CONNS * 36))
run after0 pre pre 10 3 SANSWITCH_SWITCH_AFTER=0
expect after0 "$CL" switched "$CONNS"
expect after0 "$CL" tcp_tx_bytes 0
log "SANSWITCH_SWITCH_AFTER=2: two requests over TCP; =0: none"

CHUNK=65536 run bulk pre pre 1048576 1
# Every connection switches, but a proposal refused under load (the server's receive in the
# kernel: BUSY; no answer in 50 ms) is tried again later, and the reply may then come whole into
# one receive: such a connection stays TCP, never proposed again (not_attempted). At most a few.
for l in "$CL" "$SL"; do
	sw=$(field "$l" switched)
	na=$(tr ' ' '\n' <<<"$l" | sed -n 's/^fallback_not_attempted=//p')
	[ "$sw" -ge $((CONNS - 2)) ] && [ $((sw + ${na:-0})) -eq "$CONNS" ] ||
		fail "bulk: expected $CONNS switched (at most 2 left unproposed after a refusal): $l"
done
# due after 256 KiB (the length and 4 pieces), a send proposes only when TCP's buffer is full (the
# handshake then overlaps a wait the kernel imposes anyway; the server reads along, so perhaps
# never), else the receive of the reply does: the request's rest over TCP or the SAN, the reply
# (the request echoed) partly over the SAN when the request was all on TCP
t=$(field "$CL" tcp_tx_bytes)
[ "$t" -ge $((CONNS * (8 + 4 * 65536))) ] && [ "$t" -le $((CONNS * (8 + 1048576))) ] ||
	fail "bulk: expected each connection switched after 4 of its 16 pieces or later: $CL"
expect bulk "$CL" san_tx_bytes $((CONNS * (8 + 1048576) - t))
# In one send: due at the next call, the receive of the reply; refused BUSY if the server's
# receive of the request was in the kernel then, and that receive of the reply may take it all at
# once (one exchange: the connection may stay TCP). Nothing else may happen to it.
run bulk1 pre pre 1048576 1
expect bulk1 "$CL" tcp_tx_bytes $((CONNS * (8 + 1048576)))
sw=$(field "$CL" switched)
na=$(tr ' ' '\n' <<<"$CL" | sed -n 's/^fallback_not_attempted=//p')
[ $((sw + ${na:-0})) -eq "$CONNS" ] ||
	fail "bulk1: expected each connection switched or not attempted: $CL"
log "one 1 MiB request: in 64 KiB sends switched after 256 KiB or later; in one send, at the next call" \
	"($sw of $CONNS)"

# A client whose own policy proposes later than the server's window lasts (SANSWITCH_SWITCH_AFTER=24:
# at its 25th request; the server, at the default, ends the window once the client has begun its
# 21st): refused STATE, the connection the server's own and staying TCP. Before, NOT_OWNER ("not
# owned by the acceptor") three times, at the 25th request and the two after.
# A server's candidates as socks (SANSWITCH_LITE=0); lite ones (the default, san_lite.h) count no
# exchanges. Both ends paused (SANSWITCH_NOPAUSE=0): a no-pause server keeps its window 32
# exchanges and 50 ms longer, for a proposal that comes after the due exchange.
CLIENT_ENV=SANSWITCH_SWITCH_AFTER=24 run late pre pre 10 27 SANSWITCH_LITE=0 SANSWITCH_NOPAUSE=0
expect late "$CL" switched 0
expect late "$CL" fallback_state "$CONNS"
expect late "$SL" fallback_not_attempted "$CONNS"
log "a client proposing after the server's window closed: refused STATE at once, all $CONNS on TCP"
# A lite candidate's window ends only with its time (5 s): the 25th request switches.
CLIENT_ENV=SANSWITCH_SWITCH_AFTER=24 run late_lite pre pre 10 27 SANSWITCH_LITE=1
for l in "$CL" "$SL"; do expect late_lite "$l" switched "$CONNS"; done
expect late_lite "$CL" tcp_tx_bytes $((CONNS * 24 * 18))
log "the same client, the server's candidates lite: switched at the 25th request, all $CONNS"

# A client that proposes earlier than the server's own policy says (SANSWITCH_SWITCH_AFTER=1 at the
# client alone): the server's lite receive of the 2nd request sleeps in the kernel (it would wait
# outside only from its 15th answer on), so a proposal that finds it there is refused BUSY; that
# marks the candidate, whose receives wait outside from then on, and the 3rd request switches
# (the 2nd, when the server's thread had not yet entered that receive). Before the mark, all three
# of the client's tries met a receive in the kernel: none of 10 switched.
CLIENT_ENV=SANSWITCH_SWITCH_AFTER=1 run early pre pre 10 4
for l in "$CL" "$SL"; do expect early "$l" switched "$CONNS"; done
expect early "$CL" fallback 0
t=$(field "$CL" tcp_tx_bytes)
[ "$t" -ge $((CONNS * 18)) ] && [ "$t" -le $((CONNS * 2 * 18)) ] ||
	fail "early: expected each connection switched at its 2nd or 3rd request: $CL"
log "a client proposing at its 2nd request to a server at the default: all $CONNS switched," \
	"$(((CONNS * 2 * 18 - t) / 18)) at the 2nd, the rest at the 3rd"

# A client that reads one reply in 10-byte pieces and acknowledges each (pieces.py): its exchanges
# are the acknowledgements, which the server cannot count (one send of its), so the server's
# receive of them sleeps in the kernel when the client proposes, at its 17th: refused BUSY. The
# refusal marks the server's candidate and makes the client push out what Nagle held back of its
# acknowledgements, so that receive returns and the next try finds the gate free. Before the push,
# Nagle kept them through all three tries (0-1 of 10 switched). One connection may still meet all
# three tries inside that receive if the server's thread gets no CPU between them (a receive
# that has taken its bytes but not yet returned): BUSY, at most one here.
start_pf pieces.srv pre "$PY" "$E2E_DIR/pieces.py" server '{PORTFILE}' "$CONNS" 40
rc=0
as_t pre 60 "$PY" "$E2E_DIR/pieces.py" client "$SERVER_PORT" "$CONNS" 40 \
	>"$TMP/pieces.cli.out" 2>"$TMP/pieces.cli.err" || rc=$?
wait_pid "$SERVER_PID" 30 || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/pieces.cli.out" "$TMP/pieces.cli.err" "$TMP/pieces.srv.err"; fail "pieces: exit $rc"; }
pid=$(sed -n 's/^# pid \([0-9]*\) client$/\1/p' "$TMP/pieces.cli.out")
CL=$(pid_line "$TMP/pieces.cli.err" "$pid") || exit 1
sw=$(field "$CL" switched)
busy=$(tr ' ' '\n' <<<"$CL" | sed -n 's/^fallback_busy=//p')
[ "$sw" -ge $((CONNS - 1)) ] && [ $((sw + ${busy:-0})) -eq "$CONNS" ] ||
	fail "pieces: expected $CONNS switched (at most one refused BUSY three times): $CL"
log "a client acknowledging each piece of one reply: $sw of $CONNS switched"

# An upload that half-closes before it reads (upload_eof.py: 1.4 MB in 64 KiB sends, then
# shutdown(SHUT_WR), then the server's digest): due by bytes in its 21st send (1 MiB past the
# 256 KiB), where the client's first look at the kernel's counts finds them moving
# (SANSWITCH_FAULT=counts_busy at the client: a try refused, as under load when the server does
# not answer in time); its next try would come 256 KiB later, after the end of its stream. The
# shutdown, which ends the window, is that try: every connection switched. Before, the refusal's
# later mark held at the shutdown too, and none switched (not_attempted at both ends; the same
# connection in t_switch_duplex under two CPU hogs, 1 run in 10). The refusal is checked to have
# come (the client's debug line, once per connection); this assumes no send waits for TCP's
# buffer before 1.25 MiB (about 4 MB fit on loopback with the default tcp_wmem and tcp_rmem).
start_pf eof.srv pre "$PY" "$E2E_DIR/upload_eof.py" server '{PORTFILE}' "$CONNS"
rc=0
as_t pre 60 env SANSWITCH_FAULT=counts_busy SANSWITCH_LOG=debug SANSWITCH_LOG_RATE=0 "$PY" \
	"$E2E_DIR/upload_eof.py" client "$SERVER_PORT" "$CONNS" 1400000 65536 >"$TMP/eof.cli.out" \
	2>"$TMP/eof.cli.err" || rc=$?
wait_pid "$SERVER_PID" 30 || rc=$?
no_preload_errors "$TMP/eof.cli.err" "$TMP/eof.srv.err"
[ "$rc" -eq 0 ] || { show "$TMP/eof.cli.out" "$TMP/eof.cli.err" "$TMP/eof.srv.err"; fail "eof: exit $rc"; }
[ "$(grep -c '^conn [0-9]* ok$' "$TMP/eof.cli.out")" -eq "$CONNS" ] ||
	{ show "$TMP/eof.cli.out"; fail "eof: expected $CONNS 'conn I ok' lines"; }
pid=$(sed -n 's/^# pid \([0-9]*\) client$/\1/p' "$TMP/eof.cli.out")
CL=$(pid_line "$TMP/eof.cli.err" "$pid") || exit 1
n=$(grep -c 'proposing again later' "$TMP/eof.cli.err")
[ "$n" -eq "$CONNS" ] || { show "$TMP/eof.cli.err"; fail "eof: expected one refused try per connection, saw $n"; }
pid=$(sed -n 's/^# pid \([0-9]*\) listener$/\1/p' "$TMP/eof.srv.out")
SL=$(pid_line "$TMP/eof.srv.err" "$pid") || exit 1
for l in "$CL" "$SL"; do expect eof "$l" switched "$CONNS"; done
# the whole upload over TCP (the proposal came at its end), the digest over the SAN
expect eof "$CL" tcp_tx_bytes $((CONNS * 1400000))
expect eof "$SL" san_tx_bytes $((CONNS * 32))
log "an upload refused once in a send, then half-closed before reading: all $CONNS switched at the shutdown"

run cli_only none pre 10 18
expect cli_only "$CL" switched 0
# no switch on this host answered, and none across the fabric is asked so late: "no peer"
expect cli_only "$CL" fallback_no_peer "$CONNS"
run srv_only pre none 10 18
expect srv_only "$SL" switched 0
expect srv_only "$SL" fallback_not_attempted "$CONNS"
log "one end preloaded, either way: bytes checked, nothing switched"
