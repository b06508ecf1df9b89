#!/bin/bash
# t_shape_users — processes of different users (a server running as its own user, its clients as
# another: how databases, caches and web servers are deployed), both ends preloaded, against kernel
# TCP in the same run. Neither may read the other's /proc/<pid>/fd, nor use process_vm_readv on
# it: the ownership proof takes the uid that owns the peer's TCP socket (sock_diag) against the
# side channel's credentials, and bulk data goes through the shared areas (docs/protocol.md §9.3).
#   1. switch: the server as uid 64001, its client as 64002, 10 B and 3 MB requests (3 each,
#      bytes checked by the client): every connection switches at both ends, and bulk data goes
#      through the shared areas, never trying a direct transfer it may not make. With
#      SANSWITCH_OTHER_USERS=0 at the client, its connections stay TCP. And Debian's socat
#      copying 8 MiB between the two users (digest against the file).
#   2. squatter: a process of a third uid (64003) holds the side-channel name the client tries
#      first (the exact address's; the server listens on the wildcard) and answers its
#      proposals as a server would (tests/tools/sansquat): the client must refuse it (fallback_credentials at the client for every connection), never commit to it
#      (no SWITCH reaches it), never write into the rings it was passed, and every byte still
#      arrives over TCP. The squatter must have been reached, or the case proves nothing.
#   3. forged proposal: the third uid sends the server a PROPOSE naming a live connection of the
#      client's (a plain-TCP client, so nothing else proposes); the server must REJECT it with
#      reason CREDENTIALS (3), and the connection goes on with every byte right. The control: from
#      a process of the client's own user the same proposal is accepted (the proof is by user).
#   4. garbage: a client that scribbles over the rings and area it shares with the server
#      (SANSWITCH_FAULT=ring_garbage: a hostile peer) resets only its own connection: a
#      connection of another client, switched and open all along, goes on with every byte
#      right, and the server process goes on.
# Needs root, to run processes as three users (setpriv).
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd setpriv
[ "$(id -u)" -eq 0 ] || skip "needs root to run processes of three users"
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=1
# Three users with no name here (none is nobody, 65534: a user namespace that maps few uids
# shows every unmapped one as that, and the proof then refuses it).
SRV=64001
CLI=64002
SQ=64003
for u in $SRV $CLI $SQ; do
	setpriv --reuid="$u" --regid="$u" --clear-groups true 2>/dev/null || skip "cannot run as uid $u here"
done
CONNS=3
# Another user cannot reach a pyenv shim under /root, nor, perhaps, the build tree: Debian's
# python3, and copies of what they run in the test's own directory, open to all.
UPY=/usr/bin/python3
[ -x "$UPY" ] || skip "no $UPY"
chmod 1777 "$TMP"
cp "$SO" "$E2E_DIR/users.py" "$E2E_DIR/shapes.py" "$BUILD/sansquat" "$TMP/" ||
	fail "cannot copy the build into $TMP"
chmod a+rx "$TMP"/libsanswitch.so "$TMP"/sansquat "$TMP"/*.py
UPRE=${PRELOAD//"$SO"/"$TMP/libsanswitch.so"}

# user_cmd UID MODE — set UCMD to the prefix that runs a command as UID, preloaded or not.
UCMD=()
user_cmd() {
	UCMD=(setpriv --reuid="$1" --regid="$1" --clear-groups env)
	if [ "$2" = pre ]; then UCMD+=("LD_PRELOAD=$UPRE"); else UCMD+=(-u LD_PRELOAD); fi
}

# start_srv NAME MODE [HOST] — users.py's server as $SRV for $CONNS connections.
SRV_ENV=()
start_srv() {
	user_cmd "$SRV" "$2"
	start_pf "$1" none "${UCMD[@]}" "${SRV_ENV[@]}" "$UPY" "$TMP/users.py" server '{PORTFILE}' \
		"$CONNS" "${3:-127.0.0.1}"
}

# end_srv NAME OK RESET — the server exits 0, having ended OK connections well and RESET broken.
end_srv() {
	local rc=0 ok reset
	wait_pid "$SERVER_PID" 30 || rc=$?
	ok=$(grep -c '^# conn ok' "$TMP/$1.out")
	reset=$(grep -c '^# conn reset' "$TMP/$1.out")
	[ "$rc" -eq 0 ] && [ "$ok" -eq "$2" ] && [ "$reset" -eq "$3" ] || {
		show "$TMP/$1.out" "$TMP/$1.err"
		fail "$1: server exit $rc, $ok connections ended well, $reset broken (want $2, $3)"
	}
}

# line NAME ROLE — the stats line of the process that printed "# pid P ROLE" in NAME.out.
line() {
	local pid
	pid=$(sed -n "s/^# pid \([0-9]*\) $2\$/\1/p" "$TMP/$1.out" | head -n1)
	[ -n "$pid" ] || { show "$TMP/$1.out"; fail "$1: no '# pid P $2' line"; }
	pid_line "$TMP/$1.err" "$pid"
}

# client NAME MODE SIZE [ENV...] — shapes.py's client as $CLI: $CONNS connections, 3 requests
# of SIZE bytes each, every reply checked.
client() {
	local name=$1 mode=$2 size=$3 rc=0
	shift 3
	user_cmd "$CLI" "$mode"
	tmo 60 "${UCMD[@]}" "$@" "$UPY" "$TMP/shapes.py" client "$SERVER_PORT" "$CONNS" "$size" 3 \
		>"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/$name.out" "$TMP/$name.err"; fail "$name: client exit $rc"; }
}

# start_holder NAME MODE SIZE — users.py's holder as $CLI: two exchanges of SIZE bytes, then it
# waits for $TMP/go.NAME before two more. Sets H_PID and H_PORT (its own port) once connected.
start_holder() {
	user_cmd "$CLI" "$2"
	spawn "holder.$1" none "${UCMD[@]}" "$UPY" "$TMP/users.py" holder "$SERVER_PORT" "$3" "$TMP/go.$1"
	H_PID=$SPAWN_PID
	for _ in $(seq 200); do grep -q '^holder port=' "$TMP/holder.$1.out" && break; sleep 0.05; done
	H_PORT=$(sed -n 's/^holder port=//p' "$TMP/holder.$1.out")
	[ -n "$H_PORT" ] || { show "$TMP/holder.$1.out" "$TMP/holder.$1.err"; fail "the holder did not connect"; }
}

# ---- 1. two users switch. At 3 MB blocking sends and receives, one user's would try the direct
# grant and the direct read (process_vm_writev/readv into the peer): between two users they are
# off from the start, so no try may fail (the info log would say so).
SRV_ENV=(SANSWITCH_LOG=info)
for size in 10 3000000; do
	for mode in none pre; do
		start_srv "srv.$mode.$size" "$mode"
		client "cli.$mode.$size" "$mode" "$size" SANSWITCH_LOG=info
		end_srv "srv.$mode.$size" "$CONNS" 0
	done
	c=$(line "cli.pre.$size" client) || exit 1
	s=$(line "srv.pre.$size" listener) || exit 1
	[ "$(field "$c" switched)" -eq "$CONNS" ] && [ "$(field "$s" switched)" -eq "$CONNS" ] ||
		fail "users $CLI -> $SRV, $size B: expected $CONNS switched at both ends: $c / $s"
	! grep -E 'direct (write|read) .*failed|could not (read|write)' "$TMP/cli.pre.$size.err" \
		"$TMP/srv.pre.$size.err" || fail "a direct transfer was tried between two users (above)"
	if [ "$size" -gt 100000 ]; then
		for l in "$c" "$s"; do
			[ $(($(field "$l" read_tx_bytes) + $(field "$l" grant_tx_bytes))) -gt 0 ] &&
				[ "$(field "$l" direct_tx_bytes)" -eq 0 ] && [ "$(field "$l" direct_read_tx_bytes)" -eq 0 ] ||
				fail "$size B between two users: bulk must go through the shared areas: $l"
		done
	fi
	log "uid $CLI to uid $SRV, $size B requests: $CONNS connections switched at both ends, bytes checked"
done
SRV_ENV=()

# ---- 1a. SANSWITCH_OTHER_USERS=0 at the client: its connections to another user stay TCP
start_srv srv.nousers pre
client cli.nousers pre 10 SANSWITCH_OTHER_USERS=0
end_srv srv.nousers "$CONNS" 0
c=$(line cli.nousers client) || exit 1
[ "$(field "$c" switched)" -eq 0 ] && [ "$(field "$c" fallback_credentials)" -eq "$CONNS" ] ||
	fail "SANSWITCH_OTHER_USERS=0: the client's connections should stay TCP (credentials): $c"
log "SANSWITCH_OTHER_USERS=0: $CONNS connections to another user's server stayed TCP (credentials)"

# ---- 1b. a real program: socat copies 8 MiB from a client of one user to a server of another
if command -v socat >/dev/null 2>&1; then
	head -c $((8 << 20)) /dev/urandom >"$TMP/data"
	chmod 644 "$TMP/data"
	for mode in none pre; do
		user_cmd "$SRV" "$mode"
		start_listener "socat.$mode" none 4 "${UCMD[@]}" socat -u \
			"TCP-LISTEN:{PORT},bind=127.0.0.1,reuseaddr" "CREATE:$TMP/got.$mode"
		user_cmd "$CLI" "$mode"
		rc=0
		tmo 60 "${UCMD[@]}" socat -u "OPEN:$TMP/data" "TCP:127.0.0.1:$SERVER_PORT" \
			>"$TMP/socatc.$mode.out" 2>"$TMP/socatc.$mode.err" || rc=$?
		wait_pid "$SERVER_PID" 30 || rc=$((rc + 100))
		[ "$rc" -eq 0 ] && [ "$(sha "$TMP/got.$mode")" = "$(sha "$TMP/data")" ] || {
			show "$TMP/socatc.$mode.err" "$TMP/socat.$mode.err"
			fail "socat $mode: status $rc, or the copy differs"
		}
	done
	c=$(stats_line "$TMP/socatc.pre.err") || exit 1
	s=$(stats_line "$TMP/socat.pre.err") || exit 1
	[ "$(field "$c" switched)" -eq 1 ] && [ "$(field "$s" switched)" -eq 1 ] ||
		fail "socat uid $CLI -> uid $SRV: expected the connection switched at both ends: $c / $s"
	log "socat, uid $CLI to uid $SRV: 8 MiB copied, same digest as over kernel TCP, switched at both ends"
fi

# ---- 2. a squatter of a third user on the side-channel name the client tries first
# (the server listens on the wildcard, whose name is not the one the client tries first)
start_srv srv.squat pre 0.0.0.0
user_cmd "$SQ" none
spawn squat none "${UCMD[@]}" "$TMP/sansquat" listen 127.0.0.1 "$SERVER_PORT" "$TMP/stop.squat"
SQ_PID=$SPAWN_PID
for _ in $(seq 100); do grep -q '^sansquat: listening' "$TMP/squat.out" && break; sleep 0.05; done
grep -q '^sansquat: listening' "$TMP/squat.out" ||
	{ show "$TMP/squat.out" "$TMP/squat.err"; fail "the squatter did not bind the name"; }
client cli.squat pre 300000
end_srv srv.squat "$CONNS" 0
touch "$TMP/stop.squat"
wait_pid "$SQ_PID" 30 || { show "$TMP/squat.out" "$TMP/squat.err"; fail "squatter failed"; }
q=$(grep '^sansquat: proposes=' "$TMP/squat.out") || { show "$TMP/squat.out"; fail "no squatter report"; }
c=$(line cli.squat client) || exit 1
[ "$(field "$q" proposes)" -ge 1 ] || fail "the squatter was never reached, the case proves nothing: $q"
# (an ACCEPT the squatter could not deliver, the client having given up waiting for it on a
# loaded machine, is not counted: at least one must have reached the client, and been refused)
[ "$(field "$q" accepts)" -ge 1 ] && [ "$(field "$q" switches)" -eq 0 ] &&
	[ "$(field "$q" changed)" -eq 0 ] && [ "$(field "$q" uncopied)" -eq 0 ] ||
	fail "the client committed to, or wrote for, a squatter (or got no answer from it): $q"
cred=$(field "$c" fallback_credentials) || exit 1
[ "$(field "$c" switched)" -eq 0 ] && [ "$(field "$c" fallback)" -eq "$CONNS" ] && [ "$cred" -ge 1 ] &&
	[ "$cred" -le "$(field "$q" accepts)" ] ||
	fail "the client's connections should all have stayed TCP, refusing the squatter's answers (credentials): $c / $q"
log "squatter (uid $SQ) on the name: $(field "$q" proposes) proposals, $(field "$q" accepts) answered," \
	"all refused (credentials), no commit, rings untouched, bytes checked over TCP"

# ---- 3. a forged proposal for someone else's connection
start_srv srv.forge pre
start_holder forge none 100
user_cmd "$SQ" none
tmo 30 "${UCMD[@]}" "$TMP/sansquat" propose 127.0.0.1 "$H_PORT" 127.0.0.1 "$SERVER_PORT" \
	>"$TMP/forge.out" 2>"$TMP/forge.err" || { show "$TMP/forge.out" "$TMP/forge.err"; fail "sansquat propose failed"; }
# The control: the same proposal from a process of the connection's own user passes the proof
# by user (that user is trusted as a whole, docs/protocol.md §9.3), so the REJECT above is the
# uid's doing. It then goes nowhere (no SWITCH follows): the server resumes TCP.
user_cmd "$CLI" none
tmo 30 "${UCMD[@]}" "$TMP/sansquat" propose 127.0.0.1 "$H_PORT" 127.0.0.1 "$SERVER_PORT" \
	>"$TMP/forge.same.out" 2>"$TMP/forge.same.err" ||
	{ show "$TMP/forge.same.out" "$TMP/forge.same.err"; fail "sansquat propose (control) failed"; }
touch "$TMP/go.forge"
wait_pid "$H_PID" 30 || { show "$TMP/holder.forge.out" "$TMP/holder.forge.err"; fail "the forged-upon holder failed"; }
# the server waits for CONNS connections: the rest come from a plain client
CONNS=$((CONNS - 1)) client cli.forge none 10
end_srv srv.forge "$CONNS" 0
grep -qx 'sansquat: answer REJECT reason=3' "$TMP/forge.out" ||
	{ show "$TMP/forge.out" "$TMP/srv.forge.err"; fail "a forged PROPOSE was not refused for its credentials"; }
grep -qx 'sansquat: answer ACCEPT' "$TMP/forge.same.out" ||
	{ show "$TMP/forge.same.out" "$TMP/srv.forge.err"; fail "control: the connection's own user was not accepted"; }
log "forged PROPOSE (uid $SQ) for a connection of uid $CLI: REJECT credentials (uid $CLI's own: ACCEPT)," \
	"the connection intact"

# ---- 4. a hostile peer scribbles on the shared memory of its own connection
start_srv srv.garbage pre
start_holder garbage pre 300000
user_cmd "$CLI" pre
rc=0
tmo 60 "${UCMD[@]}" SANSWITCH_FAULT=ring_garbage "$UPY" "$TMP/shapes.py" client "$SERVER_PORT" 1 300000 3 \
	>"$TMP/cli.garbage.out" 2>"$TMP/cli.garbage.err" || rc=$?
# Its own connection is reset under it (the server found the ring broken): a failure, not a hang.
[ "$rc" -eq 1 ] && grep -q 'ConnectionResetError' "$TMP/cli.garbage.err" ||
	{ show "$TMP/cli.garbage.out" "$TMP/cli.garbage.err"; fail "the scribbling client: exit $rc, want 1 by a reset"; }
touch "$TMP/go.garbage"
wait_pid "$H_PID" 30 || { show "$TMP/holder.garbage.out" "$TMP/holder.garbage.err"; fail "the other client's connection failed"; }
CONNS=1 client cli.garbage2 pre 10
end_srv srv.garbage 2 1
h=$(line holder.garbage holder) || exit 1
[ "$(field "$h" switched)" -eq 1 ] || fail "the holder's connection should have switched: $h"
grep -q 'broken ring' "$TMP/srv.garbage.err" || { show "$TMP/srv.garbage.err"; fail "the server did not say why it reset"; }
log "a hostile peer's scribbles reset its own connection only (the server said: broken ring);" \
	"a switched connection of another client went on, bytes checked"
log "PASS"
