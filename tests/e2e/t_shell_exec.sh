#!/bin/bash
# shellcheck disable=SC2016 # the sh -c scripts expand their own "$1"... on purpose
# t_shell_exec — shells, pipelines, fork and exec under the preload: output identical to the
# kernel's; TCP sockets inherited across fork/exec (and bash's /dev/tcp) carry the right bytes.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

DATA=$TMP/data
head -c $((16 * 1024 * 1024)) /dev/urandom >"$DATA"
SIZE=$(stat -c %s "$DATA")
WANT=$(sha "$DATA")

# same NAME CMD... — CMD prints the same and exits the same with and without the preload.
same() {
	local name=$1 rn=0 rp=0
	shift
	as_t none 60 "$@" >"$TMP/$name.none" 2>"$TMP/$name.none.err" || rn=$?
	as_t pre 60 "$@" >"$TMP/$name.pre" 2>"$TMP/$name.pre.err" || rp=$?
	no_preload_errors "$TMP/$name.pre.err"
	[ "$rn" -eq "$rp" ] || { show "$TMP/$name.pre.err"; fail "$name: exit $rp under the preload, $rn without"; }
	cmp -s "$TMP/$name.none" "$TMP/$name.pre" || {
		diff -u "$TMP/$name.none" "$TMP/$name.pre" | head -n 40
		fail "$name: output differs under the preload"
	}
	[ -s "$TMP/$name.pre" ] || fail "$name: no output at all"
	log "$name: same output ($(wc -c <"$TMP/$name.pre") bytes), exit $rp"
}

# expect NAME WANT CMD... — CMD (preloaded) prints exactly WANT.
expect() {
	local name=$1 want=$2 got rc=0
	shift 2
	got=$(as_t pre 60 "$@" 2>"$TMP/$name.err") || rc=$?
	no_preload_errors "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/$name.err"; fail "$name: exit $rc"; }
	[ "$got" = "$want" ] || { show "$TMP/$name.err"; fail "$name: got '$got', want '$want'"; }
	log "$name: ok ($want)"
}

# --- shells and pipelines
expect echo_tr_sha "$(printf 'HELLO, SWITCH\n' | sha256sum | cut -d' ' -f1)" \
	sh -c 'echo "hello, switch" | tr a-z A-Z | sha256sum | cut -d" " -f1'
expect gzip_pipeline "$WANT" bash -c 'cat "$1" | gzip -1 | gunzip | sha256sum | cut -d" " -f1' bash "$DATA"
expect cmd_subst "$SIZE" sh -c 'n=$(cat "$1" | wc -c); echo $((n + 0))' sh "$DATA"
expect proc_subst same bash -c 'cmp <(cat "$1") <(tee /dev/null <"$1") && echo same' bash "$DATA"
expect grandchild_preloaded yes sh -c 'sh -c "grep -q libsanswitch /proc/self/maps && echo yes || echo no"'
same seq_xargs sh -c 'seq 1 200000 | xargs -n 1000 echo | tr " " "\n" | sort -n | sha256sum'
same heredoc_loop bash -c 'for i in $(seq 1 200); do cat <<EOT
line $i $((i * i))
EOT
done | sha256sum'
same background_jobs bash -c '{ for i in 1 2 3 4; do (sleep 0.1; echo "job $i") & done; wait; } | sort'

# --- bash /dev/tcp: bash connects (preloaded), its children write to and read from the socket.
for fam in 4 6; do
	addr=127.0.0.1
	if [ "$fam" = 6 ]; then
		v6_ok dev_tcp6 || continue
		addr=::1
	fi
	for smode in pre none; do
		start_pf "echo$fam.$smode" "$smode" "$PY" "$E2E_DIR/tcpecho.py" '{PORTFILE}' "$fam"
		expect "dev_tcp$fam.server_$smode" "$WANT" bash -c '
			exec 3<>"/dev/tcp/$1/$2" || exit 2
			cat -- "$3" >&3 &
			head -c "$4" <&3 | sha256sum | cut -d" " -f1
			wait' bash "$addr" "$SERVER_PORT" "$DATA" "$SIZE"
		stop "$SERVER_PID"
	done
done

# --- sockets across fork/exec (python3 parent, sh/cat children), see forkexec.py.
rc=0
as_t pre 60 "$PY" "$E2E_DIR/forkexec.py" "$DATA" >"$TMP/forkexec.out" 2>"$TMP/forkexec.err" || rc=$?
no_preload_errors "$TMP/forkexec.err"
cat "$TMP/forkexec.out"
[ "$rc" -eq 0 ] || { show "$TMP/forkexec.err"; fail "forkexec.py under the preload exited $rc"; }
[ "$(grep -c ' ok ' "$TMP/forkexec.out")" -eq 7 ] || fail "forkexec.py: not all 7 cases ok"
# --- a connection with two numbers in one process, both ends preloaded, the default policy: perl
# dup()s its socket for writing (open(STDOUT-style ">&", $sock)) and reads through the first
# number, 5 exchanges. It switches (perl's line says switched=1; a client commits only on its
# server's ACCEPT) and every line comes back. Before, the dup kept the connection on TCP. (bash's
# own `echo >&3` writes through stdio, behind the preload: such a connection is never proposed.)
start_pf echo.dup pre env SANSWITCH_SWITCH_AFTER=1 "$PY" "$E2E_DIR/tcpecho.py" '{PORTFILE}' 4
rc=0
as_t pre 30 env SANSWITCH_SWITCH_AFTER=1 SANSWITCH_STATS=1 perl -e '
	use IO::Socket::INET;
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $ARGV[0], Proto => "tcp")
		or die "connect: $!";
	open(my $out, ">&", $s) or die "dup: $!";
	$out->autoflush(1);
	for my $i (1 .. 5) {
		print $out "line $i\n";
		my $l = "";
		while ($l !~ /\n/) { sysread($s, my $b, 4096) or die "EOF"; $l .= $b; }
		print STDOUT $l;
	}
	close($out) and close($s) or die "close: $!";' "$SERVER_PORT" >"$TMP/dup.out" 2>"$TMP/dup.err" ||
	rc=$?
stop "$SERVER_PID"
no_preload_errors "$TMP/dup.err"
[ "$rc" -eq 0 ] && [ "$(cat "$TMP/dup.out")" = "$(printf 'line %d\n' 1 2 3 4 5)" ] ||
	{ show "$TMP/dup.out" "$TMP/dup.err"; fail "perl with a dup()ed socket: exit $rc or wrong lines"; }
l=$(stats_line "$TMP/dup.err") || exit 1
[ "$(field "$l" switched)" -eq 1 ] || { show "$TMP/dup.err"; fail "perl dup: not switched: $l"; }
log "perl writing through a dup() of its socket, reading through the first: switched, 5 lines back"
log "all shell/exec checks ok"
