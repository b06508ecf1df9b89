#!/bin/bash
# t_app_postgres — Debian's PostgreSQL as it is deployed: the server runs as its own user
# (postgres), its postmaster accepts each connection and forks a backend that serves it (the
# pre-fork shape of docs/protocol.md §9.8), and the client, psql, runs as another user (uid
# 64002): the ownership proof goes by the uid owning each TCP socket (§9.3). Over kernel TCP and
# then with both preloaded, in the same run, psql makes three connections: it loads 100,000 rows
# with \copy (client to server), reads them back in order with their md5s (about 3.9 MB, server to
# client), and asks for the table's count and digest. Every output must be byte for byte the one
# over kernel TCP; preloaded, each psql's connection must have switched, and as many backends,
# whose stats lines count what went over TCP before the switch.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
# Under ASan's runtime postgres never starts, library or not: `postgres --version` with only
# libasan preloaded waits forever on glibc's locale lock in bindtextdomain (Debian 12, 15.18).
[[ ${SAN_KINDS:-} != *address* ]] || skip "postgres hangs at start under ASan's runtime, with or without the library"
[ "$(id -u)" -eq 0 ] || skip "needs root to run postgres and psql as two users"
PGBIN=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/postgres" ] && [ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/psql" ] ||
	skip "PostgreSQL is not installed (scripts/install-deps installs it)"
id postgres >/dev/null 2>&1 || skip "no postgres user"
need_cmd setpriv
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=1
CLI=64002
setpriv --reuid="$CLI" --regid="$CLI" --clear-groups true 2>/dev/null || skip "cannot run as uid $CLI"

chmod 1777 "$TMP"
cp "$SO" "$TMP/" && chmod a+rx "$TMP/libsanswitch.so" || fail "cannot copy the library"
UPRE=${PRELOAD//"$SO"/"$TMP/libsanswitch.so"}
mkdir -p "$TMP/data" && chown postgres: "$TMP/data" && chmod 700 "$TMP/data" || fail "data dir"
setpriv --reuid=postgres --regid=postgres --init-groups env -u LD_PRELOAD HOME="$TMP" \
	"$PGBIN/initdb" -D "$TMP/data" -A trust -U pgsu >"$TMP/initdb.log" 2>&1 ||
	{ show "$TMP/initdb.log"; fail "initdb failed"; }
"$PY" -c 'import hashlib
with open("'"$TMP"'/rows.tsv", "w") as f:
    for i in range(1, 100001):
        f.write("%d\t%s\n" % (i, hashlib.sha1(str(i).encode()).hexdigest() * 2))'
chmod 644 "$TMP/rows.tsv"

# as_user USER MODE — set UCMD to run a command as USER (a name or a uid), preloaded or not.
as_user() {
	UCMD=(setpriv --reuid="$1" --regid="$1" --clear-groups env)
	if [ "$2" = pre ]; then UCMD+=("LD_PRELOAD=$UPRE"); else UCMD+=(-u LD_PRELOAD); fi
	UCMD+=(HOME="$TMP")
}

# psql's -c: SQL or one backslash command each
QUERIES=(
	"create table t (i int primary key, s text)|\\copy t from '$TMP/rows.tsv'"
	"select i, md5(s) from t order by i"
	"select count(*), md5(string_agg(s, ',' order by i)) from t"
)

for mode in none pre; do
	as_user postgres "$mode"
	start_listener "pg.$mode" none 4 "${UCMD[@]}" "$PGBIN/postgres" -D "$TMP/data" -k "$TMP" \
		-h 127.0.0.1 -p '{PORT}' -c fsync=off
	as_user "$CLI" "$mode"
	for q in 0 1 2; do
		[ "$mode" = pre ] && [ "$q" -eq 0 ] &&
			{ tmo 30 "${UCMD[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$SERVER_PORT" -U pgsu -d postgres \
				-qc 'drop table if exists t' >/dev/null 2>"$TMP/drop.err" ||
				{ show "$TMP/drop.err"; fail "drop table failed"; }; }
		rc=0
		args=()
		IFS='|' read -r -a cmds <<<"${QUERIES[$q]}"
		for c in "${cmds[@]}"; do args+=(-c "$c"); done
		tmo 60 "${UCMD[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$SERVER_PORT" -U pgsu -d postgres \
			-v ON_ERROR_STOP=1 -At "${args[@]}" >"$TMP/q$q.$mode.out" 2>"$TMP/q$q.$mode.err" || rc=$?
		[ "$rc" -eq 0 ] || { show "$TMP/q$q.$mode.err" "$TMP/pg.$mode.err"; fail "$mode: psql query $q exited $rc"; }
	done
	kill -INT "$SERVER_PID" 2>/dev/null # a fast shutdown: backends end, everyone prints its line
	wait_pid "$SERVER_PID" 30 || fail "$mode: postgres did not stop"
done

[ "$(wc -l <"$TMP/q1.none.out")" -eq 100000 ] || fail "the kernel-TCP run read $(wc -l <"$TMP/q1.none.out") rows"
for q in 0 1 2; do
	cmp -s "$TMP/q$q.none.out" "$TMP/q$q.pre.out" ||
		{ show "$TMP/q$q.pre.err"; fail "query $q: the preloaded output differs from kernel TCP's"; }
	l=$(stats_line "$TMP/q$q.pre.err") || exit 1
	[ "$(field "$l" switched)" -eq 1 ] || fail "query $q: psql's connection did not switch: $l"
done
n=$(grep -c '^sanswitch: pid=[0-9]* switched=1 ' "$TMP/pg.pre.err")
[ "$n" -ge 3 ] || { grep '^sanswitch' "$TMP/pg.pre.err"; fail "$n backends switched, expected at least 3"; }
# Each began on TCP (the startup packet, authentication) and exits with it open: its line counts
# those bytes too (they read 0 before: a switched connection open at exit was not counted).
while IFS= read -r l; do
	[ "$(field "$l" tcp_rx_bytes)" -gt 0 ] && [ "$(field "$l" tcp_tx_bytes)" -gt 0 ] ||
		fail "a switched backend counts no bytes over TCP, though its connection began there: $l"
done < <(grep '^sanswitch: pid=[0-9]* switched=1 ' "$TMP/pg.pre.err")
log "postgres (user postgres, a backend forked per connection) and psql (uid $CLI): \\copy of" \
	"100000 rows, 3.9 MB read back, digest: the same bytes as over kernel TCP; psql's 3" \
	"connections switched, $n backends"
log "PASS"
