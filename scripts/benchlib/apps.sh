# scripts/benchlib/apps.sh — the bench's application runs: redis-server with redis-benchmark,
# nginx with wrk, memcached with memcslap (libmemcached-tools: Debian 12 has no memtier_benchmark),
# server and client both as MODE, a fresh server each run, stopped by the run. Servers are our own
# processes on free loopback ports, never the packages' system services. Sourced by scripts/bench.
# shellcheck shell=bash

NGINX=/usr/sbin/nginx
[ -x "$NGINX" ] || NGINX=$(command -v nginx 2>/dev/null) || NGINX=nginx
LISTEN_WAIT=${LISTEN_WAIT:-15}
# shellcheck source=tests/e2e/nginx.sh
. "$ROOT/tests/e2e/nginx.sh"

apps_need() {
	need_cmd redis-server redis-benchmark memcached memcslap wrk "$NGINX"
}

# bench_check_app MODE FILE WHAT CONNS — an application client's stats line says the run was
# what MODE claims. These clients open helper connections besides their CONNS working ones
# (redis-benchmark asks for the server's configuration first, memcslap loads its keys over one):
# too short to be proposed, they stay on TCP as not attempted. pre: at least CONNS switched, and
# no other fallback than those; pass: none switched.
bench_check_app() {
	local l sw fb na
	[ "$1" = none ] && return 0
	l=$(grep -E "$STATS_LINE_RE" "$2" | tail -n 1)
	[ -n "$l" ] || { show "$2"; fail "$3 ($1): no stats line from the client"; }
	sw=$(field "$l" switched) || exit 1
	fb=$(field "$l" fallback) || exit 1
	na=$(sed -n 's/.* fallback_not_attempted=\([0-9]*\).*/\1/p' <<<"$l")
	case $1 in
	pre) [ "$sw" -ge "$4" ] && [ "$fb" -eq "${na:-0}" ] ;;
	pass) [ "$sw" -eq 0 ] && [ "$fb" -gt 0 ] ;;
	esac || fail "$3 ($1): the client's connections did not go as the mode says ($4 working connections): $l"
}

# bench_redis MODE TEST CLIENTS REQUESTS — redis-benchmark -t TEST (get or set) with CLIENTS
# connections against the redis-server started by redis_up; sets BA_RPS (requests/s).
BA_RPS=
bench_redis() {
	local mode=$1 t=$2 c=$3 n=$4 rc=0 out=$TMP/redis.$1.out
	as_t "$mode" 120 redis-benchmark -h 127.0.0.1 -p "$SERVER_PORT" -t "$t" -c "$c" -n "$n" --csv \
		>"$out" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || { show "$out"; fail "redis-benchmark -t $t -c $c ($mode) exited $rc"; }
	BA_RPS=$(sed -n 's/^"'"${t^^}"'","\([0-9.]*\)".*/\1/p' "$out")
	[ -n "$BA_RPS" ] || { show "$out"; fail "no requests/s from redis-benchmark -t $t"; }
	bench_check_app "$mode" "$out" "redis-benchmark -t $t -c $c" "$c"
}

# redis_up MODE / redis_down — a redis-server of our own: loopback, no persistence, its files in
# $TMP. SERVER_PID, SERVER_PORT.
redis_up() {
	mkdir -p "$TMP/redis"
	start_listener "redis.srv.$1" "$1" 4 redis-server --port '{PORT}' --bind 127.0.0.1 --save '' \
		--appendonly no --daemonize no --dir "$TMP/redis" --protected-mode yes
}
redis_down() { stop "$SERVER_PID"; }

# bench_nginx MODE SECONDS — nginx (2 workers) and wrk -t2 -c20, both as MODE, a 64-byte page;
# sets BA_RPS. Socket errors and non-2xx answers fail the run.
bench_nginx() {
	local mode=$1 secs=$2 rc=0 out=$TMP/wrk.$1.out
	mkdir -p "$TMP/www"
	[ -f "$TMP/www/small" ] || printf '%063d\n' 0 >"$TMP/www/small"
	ngx_up "nginx.$mode" "$mode"
	as_t "$mode" $((secs + 30)) wrk -t2 -c20 -d"$secs" "http://127.0.0.1:$NGX_PORT/small" \
		>"$out" 2>"$TMP/wrk.$mode.err" || rc=$?
	ngx_down "nginx.$mode" "$mode"
	[ "$rc" -eq 0 ] || { show "$out" "$TMP/wrk.$mode.err"; fail "wrk ($mode) exited $rc"; }
	if grep -E 'Socket errors|Non-2xx' "$out" >/dev/null; then
		show "$out"
		fail "wrk ($mode) saw socket errors or non-2xx responses"
	fi
	BA_RPS=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$out")
	[ -n "$BA_RPS" ] || { show "$out"; fail "no requests/s from wrk"; }
	bench_check_app "$mode" "$TMP/wrk.$mode.err" "wrk -t2 -c20" 20
}

# bench_memcached MODE TEST EXECUTIONS — memcslap -t TEST (get or set), 4 threads of one
# connection each, EXECUTIONS requests per thread, against the memcached started by
# memcached_up; sets BA_RPS (the threads' requests over memcslap's own timing of the test).
bench_memcached() {
	local mode=$1 t=$2 e=$3 rc=0 out=$TMP/mc.$1.out secs
	as_t "$mode" 120 memcslap -s "127.0.0.1:$SERVER_PORT" -t "$t" -c 4 -e "$e" >"$out" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || { show "$out"; fail "memcslap -t $t ($mode) exited $rc"; }
	if grep -q 'Fatal error' "$out"; then
		show "$out"
		fail "memcslap -t $t ($mode) reported errors"
	fi
	secs=$(sed -n 's/^Time to '"$t"' .* keys by *4 threads: *\([0-9.]*\) seconds\./\1/p' "$out")
	[ -n "$secs" ] || { show "$out"; fail "no timing from memcslap -t $t"; }
	BA_RPS=$(awk -v n=$((4 * e)) -v s="$secs" 'BEGIN { if (s > 0) printf "%.0f", n / s }')
	[ -n "$BA_RPS" ] || { show "$out"; fail "memcslap -t $t: a test of 0 seconds"; }
	bench_check_app "$mode" "$out" "memcslap -t $t" 4
}

# memcached_up MODE / memcached_down — a memcached of our own on the loopback, 2 threads, no UDP.
memcached_up() {
	local -a user=()
	[ "$(id -u)" -eq 0 ] && user=(-u root) # memcached refuses to run as root unless told
	start_listener "mc.srv.$1" "$1" 4 memcached "${user[@]}" -l 127.0.0.1 -p '{PORT}' -U 0 -t 2 -m 256
}
memcached_down() { stop "$SERVER_PID"; }
