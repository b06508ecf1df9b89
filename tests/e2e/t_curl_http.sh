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

# An ASan build (make check SANITIZE=address) cannot preload curl: the ASan runtime, which must
# come first in LD_PRELOAD, hangs curl before its main (in setlocale, once p11-kit's constructor
# has run; LD_PRELOAD=libasan.so.8 curl --version hangs the same without libsanswitch). There only
# the server is preloaded.
CURL=pre
if [[ $SAN_KINDS == *address* ]]; then
	CURL=none
	log "note: ASan build: curl is not preloaded (it hangs under the ASan runtime), only the server"
fi

server http_pre pre 4
url=http://127.0.0.1:$SERVER_PORT/big.bin
fetch server_only none "$url"
fetch both "$CURL" "$url"
fetch both_via_sh "$CURL" "$url" sh
alive "$SERVER_PID" || fail "preloaded http.server died"
stop "$SERVER_PID"

if [ "$CURL" = pre ]; then
	server http_none none 4
	fetch curl_only pre "http://127.0.0.1:$SERVER_PORT/big.bin"
	fetch curl_only_via_sh pre "http://127.0.0.1:$SERVER_PORT/big.bin" sh
	stop "$SERVER_PID"
fi

if v6_ok ipv6_both; then
	server http6_pre pre 6
	fetch ipv6_both "$CURL" "http://[::1]:$SERVER_PORT/big.bin"
	stop "$SERVER_PID"
fi
log "all curl fetches ok"
