#!/bin/bash
# t_curl_http — curl fetches a 50 MiB random file from python3's http.server: curl preloaded,
# server preloaded, both, curl exec'd by a preloaded shell, and over IPv6; sha256 must match.
# timeout: 90
# shellcheck disable=SC2016 # the sh -c script expands its own "$1"... on purpose
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd curl

mkdir -p "$TMP/www"
head -c $((50 * 1024 * 1024)) /dev/urandom >"$TMP/www/big.bin"
WANT=$(sha "$TMP/www/big.bin")

# fetch NAME CLIENT_MODE URL [sh] — download URL (with `sh`: curl run by a preloaded sh -c) and
# compare its sha256.
fetch() {
	local name=$1 cmode=$2 url=$3 how=${4:-direct} rc=0 got
	if [ "$how" = sh ]; then
		as_t "$cmode" 60 sh -c 'curl -sS --fail -o "$2" "$1"' sh "$url" "$TMP/$name.bin" \
			2>"$TMP/$name.err" || rc=$?
	else
		as_t "$cmode" 60 curl -sS --fail -o "$TMP/$name.bin" "$url" 2>"$TMP/$name.err" || rc=$?
	fi
	no_preload_errors "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/$name.err"; fail "$name: curl exited $rc"; }
	got=$(sha "$TMP/$name.bin")
	[ "$got" = "$WANT" ] || fail "$name: sha256 $got, want $WANT ($(stat -c %s "$TMP/$name.bin") bytes)"
	rm -f "$TMP/$name.bin"
	log "$name: ok, sha256 matches"
}

# server NAME MODE FAMILY — python3 -m http.server on a free loopback port.
server() {
	local addr=127.0.0.1
	[ "$3" = 6 ] && addr=::1
	start_listener "$1" "$2" "$3" "$PY" -m http.server --bind "$addr" --directory "$TMP/www" '{PORT}'
}

server http_pre pre 4
url=http://127.0.0.1:$SERVER_PORT/big.bin
fetch server_only none "$url"
fetch both pre "$url"
fetch both_via_sh pre "$url" sh
alive "$SERVER_PID" || fail "preloaded http.server died"
stop "$SERVER_PID"

server http_none none 4
fetch curl_only pre "http://127.0.0.1:$SERVER_PORT/big.bin"
fetch curl_only_via_sh pre "http://127.0.0.1:$SERVER_PORT/big.bin" sh
stop "$SERVER_PID"

if v6_ok ipv6_both; then
	server http6_pre pre 6
	fetch ipv6_both pre "http://[::1]:$SERVER_PORT/big.bin"
	stop "$SERVER_PID"
fi
log "all curl fetches ok"
