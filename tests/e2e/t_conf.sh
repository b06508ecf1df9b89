#!/bin/bash
# t_conf — the configuration file (SANSWITCH_CONF, man/sanswitch.conf.5), both ends preloaded,
# sanverify pairs (every byte checked) read through the stats lines (SANSWITCH_STATS=1):
#   - one file for both processes, with a client rule (tcp for the connect()s to one port) and a
#     server rule (tcp for the connections accepted on another): the first port's connections
#     stay TCP with reason conf at the client (the server's window closes: not_attempted), the
#     second's with reason conf at the server and policy (its REJECT) at the client; a third port
#     switches;
#   - a rule for another program: nothing stays TCP;
#   - the file's provider none, and SANSWITCH_PROVIDER over it;
#   - a broken file: exactly one warning per process naming file:line, and the defaults (switch);
#   - docs/sanswitch.conf.example is a good file.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
C=3
CONF=$TMP/sanswitch.conf

# conf_pair NAME PORT — a sanverify pair of C connections on PORT (0: any), under $CONF.
conf_pair() {
	SANSWITCH_CONF=$CONF vpair "$1" pre pre "$C" -p "$2" -- -b 1M
	CL=$(stats_line "$TMP/$1.cli.err") || exit 1
	SL=$(stats_line "$TMP/$1.srv.err") || exit 1
	log "$1 client: $CL"
	log "$1 server: $SL"
}

# within NAME WHAT GOT WANT — a count of a connection that ended on TCP: the kernel's, which may
# hold the peer's FIN (san_stats_tcp_payload: state CLOSE), so WANT to WANT + C.
within() {
	if [ "$3" -lt "$4" ] || [ "$3" -gt $(($4 + C)) ]; then
		fail "$1: $2 is $3, expected $4 (+ at most $C FIN bytes)"
	fi
}

# tcp_bytes NAME — pair NAME's connections stayed TCP on both sides: every byte of the verified
# stream (VBYTES, plus a 32-byte header per connection upstream) counted on TCP.
tcp_bytes() {
	local up=$((VBYTES + 32 * C)) down=$VBYTES
	within "$1" "client tx" "$(field "$CL" tcp_tx_bytes)" "$up"
	within "$1" "server rx" "$(field "$SL" tcp_rx_bytes)" "$up"
	within "$1" "server tx" "$(field "$SL" tcp_tx_bytes)" "$down"
	within "$1" "client rx" "$(field "$CL" tcp_rx_bytes)" "$down"
}

# stayed_tcp NAME LINE WHAT REASON — every connection of LINE stayed TCP, all of them for REASON.
stayed_tcp() {
	local sw fb why
	sw=$(field "$2" switched) || exit 1
	fb=$(field "$2" fallback) || exit 1
	why=$(field "$2" "fallback_$4") || exit 1
	if [ "$sw" -ne 0 ] || [ "$fb" -ne "$C" ] || [ "$why" -ne "$C" ]; then
		show "$TMP/$1.cli.err" "$TMP/$1.srv.err"
		fail "$1: the $3's $C connections did not all stay TCP for reason $4: $2"
	fi
	if [ "$(field "$2" san_tx_bytes)" -ne 0 ] || [ "$(field "$2" san_rx_bytes)" -ne 0 ]; then
		fail "$1: the $3 moved bytes on the SAN: $2"
	fi
}

# no_reason LINE REASON — LINE has no fallback for REASON.
no_reason() {
	case " $1 " in
	*" fallback_$2="*) fail "unexpected fallback_$2: $1" ;;
	esac
}

# no_warning NAME — neither process of pair NAME printed a warning.
no_warning() {
	if grep -q ': warn: ' "$TMP/$1.cli.err" "$TMP/$1.srv.err"; then
		show "$TMP/$1.cli.err" "$TMP/$1.srv.err"
		fail "$1: a warning from a good file"
	fi
}

# ------------------------------------------------------------ a client rule and a server rule
P_CLI=$(free_port) || fail "free_port"
P_SRV=$(free_port) || fail "free_port"
[ "$P_CLI" != "$P_SRV" ] || P_SRV=$(free_port) || fail "free_port"
cat >"$CONF" <<EOF
# t_conf: one port the client keeps on TCP, one the server does
spin_us 20

switch  client  sanverify  10.0.0.0/8  *      # (never matches: loopback here)
tcp     client  sanverif?  127.0.0.0/8 $P_CLI # a glob on the program's name
tcp	server  *          *           $P_SRV
EOF

conf_pair cli "$P_CLI"
no_warning cli
stayed_tcp cli "$CL" client conf
no_reason "$SL" conf
[ "$(field "$SL" switched)" -eq 0 ] || fail "cli: the server switched: $SL"
tcp_bytes cli

conf_pair srv "$P_SRV"
no_warning srv
stayed_tcp srv "$SL" server conf
stayed_tcp srv "$CL" client policy
no_reason "$CL" conf
tcp_bytes srv

conf_pair other 0
no_warning other
vswitched other "$C"
log "a client rule, a server rule, and a port of neither: conf, conf/policy, switched"

# ------------------------------------------------------------ another program's rule
cat >"$CONF" <<EOF
tcp * no-such-program * *
EOF
conf_pair prog 0
no_warning prog
vswitched prog "$C"
log "a rule for another program leaves these connections alone"

# ------------------------------------------------------------ a global option, the environment over it
printf 'provider none\n' >"$CONF"
conf_pair none 0
stayed_tcp none "$CL" client no_provider
stayed_tcp none "$SL" server no_provider
tcp_bytes none
SANSWITCH_PROVIDER=shm conf_pair envwins 0
vswitched envwins "$C"
log "the file's provider none holds, SANSWITCH_PROVIDER=shm overrides it"

# ------------------------------------------------------------ a broken file
cat >"$CONF" <<EOF
provider none
tcp client * * *
tcp client * 127.0.0.1 70000
this line is never read
EOF
conf_pair broken 0
for f in "$TMP/broken.cli.err" "$TMP/broken.srv.err"; do
	n=$(grep -c ': warn: ' "$f")
	[ "$n" -eq 1 ] || { show "$f"; fail "broken: $n warnings in $(basename -- "$f"), expected 1"; }
	grep -qE "^sanswitch\[[0-9]+\]: warn: $CONF:3: port 70000 is above 65535; the file is ignored$" "$f" ||
		{ show "$f"; fail "broken: the warning does not name $CONF:3 and the problem"; }
done
# ignored whole: neither its provider none nor its tcp rule of line 2 applies
vswitched broken "$C"
log "a broken file: one warning each ($CONF:3), and the defaults: every connection switched"

# ------------------------------------------------------------ the example file is a good file
out=$(as pre env SANSWITCH_CONF="$ROOT/docs/sanswitch.conf.example" true 2>&1) ||
	fail "true under docs/sanswitch.conf.example failed: $out"
[ -z "$out" ] || fail "docs/sanswitch.conf.example is not a good file: $out"
bad=$(as pre env SANSWITCH_CONF="$CONF" true 2>&1)
[[ $bad == *"$CONF:3: port 70000"* ]] || fail "the same check misses a broken file: $bad"
log "docs/sanswitch.conf.example reads without a warning"

# ------------------------------------------------------------ the file's log_file and log_level
# The file's log_file (%p: one per process) gets the messages; SANSWITCH_LOG_FILE wins over it.
mkdir "$TMP/lf"
printf 'log_level debug\nlog_file %s\n' "$TMP/lf/conf.%p" >"$CONF"
out=$(as pre env SANSWITCH_CONF="$CONF" "$PY" -c 'import os, socket; socket.socket(); print(os.getpid())' 2>"$TMP/lf.err") ||
	{ show "$TMP/lf.err"; fail "log_file: python3 failed"; }
pid=$(tail -n 1 <<<"$out")
grep -q "^sanswitch\[$pid\]: debug: fd [0-9]*: tracked tcp socket" "$TMP/lf/conf.$pid" 2>/dev/null ||
	{ ls -l "$TMP/lf" >&2; show "$TMP/lf.err"; fail "log_file: no debug lines of pid $pid in $TMP/lf/conf.$pid"; }
! grep -q "^sanswitch\[$pid\]" "$TMP/lf.err" || { show "$TMP/lf.err"; fail "log_file: pid $pid's lines on stderr"; }
out=$(as pre env SANSWITCH_CONF="$CONF" SANSWITCH_LOG_FILE="$TMP/lf/env.%p" "$PY" -c 'import os, socket; socket.socket(); print(os.getpid())' 2>"$TMP/lf2.err") ||
	{ show "$TMP/lf2.err"; fail "log_file under SANSWITCH_LOG_FILE: python3 failed"; }
pid=$(tail -n 1 <<<"$out")
[ -s "$TMP/lf/env.$pid" ] && [ ! -e "$TMP/lf/conf.$pid" ] ||
	{ ls -l "$TMP/lf" >&2; fail "SANSWITCH_LOG_FILE does not win over the file's log_file"; }
log "the file's log_file and log_level: debug lines in its file; SANSWITCH_LOG_FILE wins"

# ------------------------------------------------------------ sanstat names the rule's reason
# A connection kept on TCP by a client rule shows in sanstat as fallback, provider tcp, reason
# conf, while it is open (issue 18: the rule is seen in sanstat and in the stats line).
need_cmd jq
P_HOLD=$(free_port) || fail "free_port"
printf 'tcp client * 127.0.0.1 %s\n' "$P_HOLD" >"$CONF"
rm -f "$TMP/hold.go"
HOLD='import os, socket, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
if sys.argv[3] == "srv":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen(1); c, _ = l.accept(); c.recv(1)
    while not os.path.exists(go): time.sleep(0.05)
else:
    c = socket.create_connection(("127.0.0.1", port)); c.sendall(b"x")
    while not os.path.exists(go): time.sleep(0.05)'
spawn hold.srv pre env SANSWITCH_CONF="$CONF" "$PY" -c "$HOLD" "$P_HOLD" "$TMP/hold.go" srv
HSRV=$SPAWN_PID
wait_listen "$P_HOLD" "$HSRV" 10 || fail "the holding server does not listen on $P_HOLD"
spawn hold.cli pre env SANSWITCH_CONF="$CONF" "$PY" -c "$HOLD" "$P_HOLD" "$TMP/hold.go" cli
HCLI=$SPAWN_PID
row=
for _ in $(seq 100); do
	row=$("$BUILD/sanstat" --json -p "$HCLI" --port "$P_HOLD" 2>/dev/null |
		jq -c '.processes[].connections[] | select(.role == "client")' 2>/dev/null) || row=
	[ -n "$row" ] && break
	sleep 0.1
done
touch "$TMP/hold.go"
wait_pid "$HCLI" 10 >/dev/null || true
wait_pid "$HSRV" 10 >/dev/null || true
[ -n "$row" ] || fail "sanstat never showed the client's connection to port $P_HOLD"
[ "$(jq -r '"\(.state)/\(.provider)/\(.fallback_reason)"' <<<"$row")" = fallback/tcp/conf ] ||
	fail "sanstat shows the rule's connection as $row, expected fallback/tcp/conf"
log "sanstat: the connection a rule keeps on TCP shows fallback, tcp, reason conf"
