#!/bin/bash
# t_app_rsync — rsync's daemon mode, both ends preloaded: the client negotiates over the
# connection, then forks (on a pull its child reads the socket while the parent writes it; on a
# push the daemon's child forks so), so the connection, switched by then, is used by two processes
# at once (docs/engine.md §7.1). Before shared connections the fork child's copy failed ECONNRESET
# and rsync exited 12 (pull) or 10 (push). A tree of a few files (1 KiB .. 8 MiB) is pulled and
# pushed, over kernel TCP and preloaded in the same run: exit 0, trees equal (diff -r), and the
# client's stats lines say its connection switched. Preloaded three times.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd rsync
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1 # (at 0 the client proposes before the daemon's child has touched
# the connection, which then stays TCP: not_owner)
export SANSWITCH_STATS=1

SRC=$TMP/src
mkdir -p "$SRC/sub"
head -c 1024 /dev/urandom >"$SRC/one_k"
head -c $((64 * 1024)) /dev/urandom >"$SRC/sub/sixty_four_k"
head -c $((1024 * 1024)) /dev/urandom >"$SRC/sub/one_m"
head -c $((8 * 1024 * 1024)) /dev/urandom >"$SRC/eight_m"
echo "a small text file" >"$SRC/sub/text"

run() { # MODE [RUN]: one daemon, one pull, one push
	local mode=$1 rc=0 n
	local d=$TMP/$mode${2:-}
	mkdir -p "$d/pulled" "$d/pushed"
	cat >"$d/rsyncd.conf" <<CONF
use chroot = no
uid = $(id -u)
gid = $(id -g)
log file = $d/rsyncd.log
[src]
	path = $SRC
	read only = yes
[dst]
	path = $d/pushed
	read only = no
CONF
	start_listener "rsyncd.$mode${2:-}" "$mode" 4 rsync --daemon --no-detach --config="$d/rsyncd.conf" \
		--address=127.0.0.1 --port='{PORT}'
	as_t "$mode" 60 rsync -a "rsync://127.0.0.1:$SERVER_PORT/src/" "$d/pulled/" \
		>"$TMP/pull.$mode.out" 2>"$TMP/pull.$mode.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/pull.$mode.err" "$d/rsyncd.log"; fail "$mode: pull: rsync exited $rc"; }
	diff -r "$SRC" "$d/pulled" || fail "$mode: pull: the trees differ"
	as_t "$mode" 60 rsync -a "$SRC/" "rsync://127.0.0.1:$SERVER_PORT/dst/" \
		>"$TMP/push.$mode.out" 2>"$TMP/push.$mode.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/push.$mode.err" "$d/rsyncd.log"; fail "$mode: push: rsync exited $rc"; }
	diff -r "$SRC" "$d/pushed" || fail "$mode: push: the trees differ"
	stop "$SERVER_PID"
	if [ "$mode" = pre ]; then
		for op in pull push; do
			n=$(grep -cE '^sanswitch: pid=[0-9]+ switched=1 ' "$TMP/$op.pre.err") || true
			[ "$n" -ge 1 ] || { show "$TMP/$op.pre.err"; fail "pre: $op: no stats line of the client says switched=1"; }
		done
		log "pre: pull and push: exit 0, trees equal, the client's connection switched ($(grep -hE '^sanswitch: pid=[0-9]+ switched=1 ' "$TMP/pull.pre.err" | head -n1 | cut -d' ' -f2-4))"
	else
		log "$mode: pull and push: exit 0, trees equal"
	fi
}

run none
for r in 1 2 3; do
	run pre "$r"
done
