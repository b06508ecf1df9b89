#!/bin/bash
# t_app_nginx — nginx (a master and 2 workers accepting on the listener they inherit) serving static
# files on the loopback, with the default switch policy, against kernel TCP in the same run. wrk
# (-t2 -c20 -d3) fetches a 64-byte page in rounds kernel, preloaded, kernel, preloaded (nginx and
# wrk both preloaded, or neither; a fresh nginx each round): no socket errors, no non-2xx
# responses, and the workers together and wrk each switched at least wrk's 20 connections. The
# best requests/s of each mode and their ratio are logged; only a catastrophe (preloaded under
# 0.3x kernel TCP) fails, this machine being shared and noisy. Then curl fetches a 50 MiB random
# file, with nothing preloaded and with curl and nginx preloaded: the sha256 must match, within
# 60 s, and the preloaded curl's one connection must have switched. Last, one curl fetches an 8 MiB
# file 20 times, each on a new connection, nginx and curl both preloaded or neither: every
# connection switched, and the preloaded fetches within twice the kernel's time plus 1 s (nginx
# corks its socket around sendfile: a MARK held there stalled each connection 200 ms). Last, curl
# uploads the 50 MiB file by PUT (the DAV module; curl sends Expect: 100-continue) 3 times over
# kernel TCP and 10 times preloaded, each within 20 s, each stored file the same by sha256 (nginx
# reads a body as much as FIONREAD says, then waits for an edge: before the doorbell queue was
# bounded, about half the uploads hung, docs/protocol.md "A bounded doorbell queue").
# nginx redirects its stderr into the error_log file once it has read its configuration (and the
# workers inherit that): the stats lines of master and workers (SANSWITCH_STATS=1) are found there.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
NGINX=/usr/sbin/nginx
[ -x "$NGINX" ] || NGINX=$(command -v nginx) || skip "nginx not installed"
need_cmd wrk curl
unset SANSWITCH_SWITCH_AFTER # the default policy: what a user of nginx gets
export SANSWITCH_STATS=1
CONNS=20
FLOOR=0.3 # fail only under this fraction of kernel TCP's requests/s
LISTEN_WAIT=15 # s for nginx to listen and start its workers; sanitized builds start slowly
[ -z "${SAN_KINDS:-}" ] || LISTEN_WAIT=90
# shellcheck source=tests/e2e/nginx.sh
. "$E2E_DIR/nginx.sh"

mkdir -p "$TMP/www/up"
printf '%063d\n' 0 >"$TMP/www/small" # 64 bytes
head -c $((50 * 1024 * 1024)) /dev/urandom >"$TMP/www/big.bin"
MID_BYTES=$((8 * 1024 * 1024))
head -c "$MID_BYTES" "$TMP/www/big.bin" >"$TMP/www/mid.bin"
WANT=$(sha "$TMP/www/big.bin")

# bench NAME MODE — one round: a fresh nginx and wrk, both as MODE. Sets RPS (requests/s).
RPS=
bench() {
	local name=$1 mode=$2 rc=0 out reqs wl wsw n w l sum=0 per=
	ngx_up "$name.nginx" "$mode"
	out=$TMP/$name.wrk.out
	as_t "$mode" 30 wrk -t2 -c$CONNS -d3 "http://127.0.0.1:$NGX_PORT/small" \
		>"$out" 2>"$TMP/$name.wrk.err" || rc=$?
	no_preload_errors "$TMP/$name.wrk.err"
	[ "$rc" -eq 0 ] || { show "$out" "$TMP/$name.wrk.err" "$NGX_LOG"; fail "$name: wrk exited $rc"; }
	ngx_down "$name.nginx" "$mode"
	RPS=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$out")
	reqs=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$out")
	if [ -z "$RPS" ] || [ -z "$reqs" ]; then
		show "$out"
		fail "$name: cannot parse wrk's output"
	fi
	[ "$reqs" -gt 0 ] || { show "$out"; fail "$name: wrk made 0 requests"; }
	# wrk prints these two lines only when a count is not zero
	if grep -E 'Socket errors|Non-2xx' "$out" >/dev/null; then
		show "$out" "$NGX_LOG"
		# wrk reads only when epoll said readable, and counts any failed read(), EAGAIN included,
		# as a read error (and reconnects): a spurious readable shows up here
		fail "$name: wrk saw socket errors or non-2xx responses"
	fi
	if [ "$mode" = pre ]; then
		wl=$(stats_line "$TMP/$name.wrk.err") || exit 1
		wsw=$(field "$wl" switched) || exit 1
		for w in $NGX_WORKERS; do
			l=$(pid_line "$NGX_LOG" "$w") || exit 1
			n=$(field "$l" switched) || exit 1
			sum=$((sum + n))
			per="$per $w:$n/$(field "$l" accepts)"
		done
		log "$name: switched: wrk $wsw of $(field "$wl" connects) connects" \
			"(fallback $(field "$wl" fallback)), workers $sum (pid:switched/accepts$per)"
		if [ "$wsw" -lt "$CONNS" ] || [ "$sum" -lt "$CONNS" ]; then
			grep -h '^sanswitch' "$TMP/$name.wrk.err" "$NGX_LOG" >&2
			fail "$name: expected >= $CONNS switched connections in wrk and in the workers," \
				"got wrk $wsw, workers $sum"
		fi
	elif grep -q '^sanswitch:' "$TMP/$name.wrk.err"; then
		fail "$name: a stats line from a wrk that was not preloaded"
	fi
	log "$name: $reqs requests, $RPS requests/s"
}

# run_curl NAME MODE ARGS... — curl as MODE (pre|none) with ARGS, within 60 s; it must succeed.
# Its output in $TMP/NAME.curl.out, its stderr in $TMP/NAME.curl.err.
run_curl() {
	local name=$1 mode=$2 rc=0
	shift 2
	as_t "$mode" 60 curl -sS --fail "$@" >"$TMP/$name.curl.out" 2>"$TMP/$name.curl.err" || rc=$?
	no_preload_errors "$TMP/$name.curl.err"
	[ "$rc" -eq 0 ] || {
		show "$TMP/$name.curl.out" "$TMP/$name.curl.err" "$NGX_LOG"
		fail "$name: curl exited $rc (124: not done in 60 s)"
	}
}

# fetch NAME SMODE CMODE — a fresh nginx as SMODE and curl as CMODE fetch big.bin; bytes and time
# checked.
fetch() {
	local name=$1 smode=$2 cmode=$3 got secs l
	ngx_up "$name.nginx" "$smode"
	run_curl "$name" "$cmode" -o "$TMP/$name.bin" -w '%{time_total}\n' "http://127.0.0.1:$NGX_PORT/big.bin"
	ngx_down "$name.nginx" "$smode"
	got=$(sha "$TMP/$name.bin")
	[ "$got" = "$WANT" ] || fail "$name: sha256 $got, want $WANT ($(stat -c %s "$TMP/$name.bin") bytes)"
	rm -f "$TMP/$name.bin"
	secs=$(head -n1 "$TMP/$name.curl.out")
	if [ "$cmode" = pre ]; then
		l=$(stats_line "$TMP/$name.curl.err") || exit 1
		[ "$(field "$l" switched)" -eq 1 ] || fail "$name: curl's connection did not switch: $l"
		log "$name: 50 MiB, sha256 ok, ${secs} s, curl switched=1 (san_rx_bytes=$(field "$l" san_rx_bytes))"
	else
		log "$name: nginx $smode, curl $cmode: 50 MiB, sha256 ok, ${secs} s"
	fi
}

# fetches NAME MODE — a fresh nginx and one curl, both as MODE, fetch mid.bin NFETCH times, each on
# a new connection (Connection: close). Sets FETCH_SECS (the sum of curl's time_total). Each
# preloaded connection switches 256 KiB in, while nginx sends the rest corked (tcp_nopush): a
# MARK left in the corked socket kept the client off the ring until the kernel's cork timer
# fired, 200 ms a connection (seconds in all, against milliseconds over kernel TCP).
NFETCH=20
FETCH_SECS=
fetches() {
	local name=$1 mode=$2 i l n
	local -a args=()
	ngx_up "$name.nginx" "$mode"
	for i in $(seq "$NFETCH"); do args+=(-o /dev/null "http://127.0.0.1:$NGX_PORT/mid.bin"); done
	run_curl "$name" "$mode" -H 'Connection: close' -w '%{time_total} %{size_download}\n' "${args[@]}"
	ngx_down "$name.nginx" "$mode"
	n=$(awk -v want="$MID_BYTES" '$2 == want' "$TMP/$name.curl.out" | wc -l)
	[ "$n" -eq "$NFETCH" ] || { show "$TMP/$name.curl.out"; fail "$name: $n of $NFETCH fetches complete"; }
	FETCH_SECS=$(awk '{ t += $1 } END { printf "%.3f", t }' "$TMP/$name.curl.out")
	if [ "$mode" = pre ]; then
		l=$(stats_line "$TMP/$name.curl.err") || exit 1
		[ "$(field "$l" switched)" -eq "$NFETCH" ] ||
			fail "$name: curl switched $(field "$l" switched) of $NFETCH connections: $l"
	fi
	log "$name: $NFETCH fetches of 8 MiB, each a new connection ($mode): $FETCH_SECS s in all"
}

# An ASan build (make check SANITIZE=address) cannot preload curl (t_curl_http: it hangs under the
# ASan runtime before its main): there only nginx is preloaded for the big file.
CURL=pre
if [[ $SAN_KINDS == *address* ]]; then
	CURL=none
	log "note: ASan build: curl is not preloaded (it hangs under the ASan runtime), only nginx"
fi

best_k=0 best_p=0
for r in 1 2; do
	bench "kernel$r" none
	best_k=$(awk -v a="$best_k" -v b="$RPS" 'BEGIN { print (b > a) ? b : a }')
	bench "pre$r" pre
	best_p=$(awk -v a="$best_p" -v b="$RPS" 'BEGIN { print (b > a) ? b : a }')
done
ratio=$(awk -v p="$best_p" -v k="$best_k" 'BEGIN { printf "%.2f", p / k }')
log "wrk -t2 -c$CONNS -d3, best of 2: kernel TCP $best_k requests/s, preloaded $best_p," \
	"ratio pre/kernel $ratio"
# A sanitized library is slower by design, and the kernel rounds run without it: no floor there.
if [ -n "$SAN_KINDS" ]; then
	log "note: sanitized build ($SAN_KINDS): the ratio is not checked"
elif ! awk -v r="$ratio" -v f="$FLOOR" 'BEGIN { exit !(r >= f) }'; then
	fail "preloaded nginx+wrk at $ratio of kernel TCP's requests/s (floor $FLOOR)"
fi

fetch curl_kernel none none
fetch curl_pre pre "$CURL"
if [ "$CURL" = pre ]; then
	fetches fetches_kernel none
	k=$FETCH_SECS
	fetches fetches_pre pre
	# a stall is seconds; the machine's noise is a fraction of the kernel's time
	if ! awk -v p="$FETCH_SECS" -v k="$k" 'BEGIN { exit !(p <= 2 * k + 1.0) }'; then
		fail "$NFETCH new connections of 8 MiB took $FETCH_SECS s preloaded, $k s over kernel" \
			"TCP (bound: twice the kernel's + 1 s): a stall"
	fi
fi
# uploads NAME MODE N — a fresh nginx and curl, both as MODE, PUT big.bin N times (a new curl
# each): each answered 201 within 20 s, each stored file big.bin by sha256, and (pre) each
# curl's connection switched.
uploads() {
	local name=$1 mode=$2 n=$3 i code l
	ngx_up "$name.nginx" "$mode"
	for i in $(seq "$n"); do
		run_curl "$name.$i" "$mode" --max-time 20 -T "$TMP/www/big.bin" -o /dev/null \
			-w '%{http_code}\n' "http://127.0.0.1:$NGX_PORT/up/f$i.bin"
		code=$(head -n1 "$TMP/$name.$i.curl.out")
		[ "$code" = 201 ] || fail "$name: upload $i answered $code"
		[ "$(sha "$TMP/www/up/f$i.bin")" = "$WANT" ] || fail "$name: upload $i stored other bytes"
		rm -f "$TMP/www/up/f$i.bin"
		if [ "$mode" = pre ]; then
			l=$(stats_line "$TMP/$name.$i.curl.err") || exit 1
			[ "$(field "$l" switched)" -eq 1 ] || fail "$name: upload $i did not switch: $l"
		fi
	done
	ngx_down "$name.nginx" "$mode"
	log "$name: $n uploads of 50 MiB by PUT ($mode), each stored whole"
}

uploads put_kernel none 3
[ "$CURL" = pre ] && uploads put_pre pre 10
log "nginx ok: kernel TCP and preloaded"
