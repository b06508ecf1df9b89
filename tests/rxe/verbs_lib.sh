# tests/rxe/verbs_lib.sh — sourced by the t_verbs_*.sh tests: build/sanverbs servers and clients.
# Sets SV, addr, tmp (removed on exit, with every server still running killed), failed, port.
root=${SANSWITCH_ROOT:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
SV=$root/build/sanverbs
addr=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_verbs.XXXXXX") || exit 1
srv_pids=()
failed=0
cleanup() {
	local p
	for p in "${srv_pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf -- "$tmp"
}
trap cleanup EXIT
[ -x "$SV" ] || { echo "FAIL: $SV is missing (make)"; exit 1; }

# start_server NAME [PREFIX...] -- ARGS...: run `PREFIX sanverbs server $addr $port ARGS` in the
# background with output in $tmp/NAME.out/.err, wait for "listening"; sets srv_pid.
start_server() {
	local name=$1 pre=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do pre+=("$1"); shift; done
	shift
	port=$((port + 1))
	"${pre[@]}" "$SV" server "$addr" "$port" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	srv_pid=$!
	srv_pids+=("$srv_pid")
	until_listening "$tmp/$name.err" "$srv_pid"
}

# until_listening ERRFILE PID: wait (60 s at most: a server's first listen loads rdma-core, seconds
# on a loaded emulated guest) until the server PID has said "listening" in ERRFILE, or is gone.
# The shell's own reading and a read that times out on a FIFO, not grep and sleep: a program
# started in the emulated guest costs a tenth of a second or more, each turn.
until_listening() {
	local text end=$((EPOCHSECONDS + 60))
	[ -p "$tmp/.nap" ] || mkfifo "$tmp/.nap"
	while [ "$EPOCHSECONDS" -lt "$end" ]; do
		text=
		IFS= read -r -d '' text 2>/dev/null <"$1"
		[[ $text == *listening* ]] && return 0
		kill -0 "$2" 2>/dev/null || return 0
		read -rt 0.05 <>"$tmp/.nap"
	done
}

# wait_server PID: its exit status (bounded: a stuck server is killed after 120 s).
wait_server() {
	timeout 120 tail --pid="$1" -f /dev/null
	kill "$1" 2>/dev/null
	wait "$1"
}

ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
# show FILE...: indented, without the "listening" line
show() { sed 's/^/       /' "$@" | grep -v 'listening on'; }
