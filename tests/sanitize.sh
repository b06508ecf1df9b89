# tests/sanitize.sh — what a sanitized build (make SANITIZE=...: docs/testing.md, "Sanitizers") needs from
# the test drivers. Sourced by tests/run, tests/e2e/run and tests/e2e/lib.sh.
# shellcheck shell=bash
#
# san_detect SO — look at the library's own dependencies (so a build dir given by hand is handled
# like one given by make) and set:
#   SAN_KINDS     "address", "undefined", "address undefined" or empty (not sanitized)
#   SAN_PRELOAD   what LD_PRELOAD must hold to load SO: SO itself; with ASan, the ASan runtime
#                 first. An ASan-instrumented shared library needs the runtime first in the
#                 process's initial library list (without it, python3 preloaded with it alone
#                 crashes at start), and the programs we preload into (python3, iperf3, curl...)
#                 are not linked with it. libubsan has no such rule: it is simply a dependency
#                 of SO, loaded with it.
# shellcheck disable=SC2034 # SAN_KINDS and SAN_PRELOAD are for the script that sources this
san_detect() {
	local so=$1 deps
	SAN_KINDS=
	SAN_PRELOAD=$so
	[ -f "$so" ] || return 0
	deps=$(ldd "$so" 2>/dev/null) || return 0
	local asan ubsan
	asan=$(awk '$1 ~ /^libasan\.so/ && $3 ~ /^\// { print $3; exit }' <<<"$deps")
	ubsan=$(awk '$1 ~ /^libubsan\.so/ { print $1; exit }' <<<"$deps")
	if [ -n "$asan" ]; then
		SAN_KINDS=address
		SAN_PRELOAD="$asan $so"
	fi
	[ -n "$ubsan" ] && SAN_KINDS="${SAN_KINDS:+$SAN_KINDS }undefined"
	return 0
}

# The caller's own ASAN_OPTIONS / UBSAN_OPTIONS, taken once (a driver started by another one
# inherits them here) and put last by san_options, so they win.
: "${SAN_USER_ASAN_OPTIONS=${ASAN_OPTIONS:-}}" "${SAN_USER_UBSAN_OPTIONS=${UBSAN_OPTIONS:-}}"
export SAN_USER_ASAN_OPTIONS SAN_USER_UBSAN_OPTIONS

# san_options DIR — export ASAN_OPTIONS and UBSAN_OPTIONS for the processes of one test: every
# report goes to a file DIR/asan.PID or DIR/ubsan.PID (never to the programs' stderr, which tests
# compare), and the caller fails the test if DIR holds any (san_reports). The first finding ends
# the process (halt_on_error; UBSan aborts anyway, -fno-sanitize-recover=all). Leak detection is
# off here: the programs we preload into (python3, iperf3, curl, sh...) do not free everything at
# exit, and that is not ours to report; tests/e2e/lib.sh turns it back on for our own tools.
# ASan's own SIGSEGV, SIGBUS and SIGFPE handlers stay out: a process must have the signal
# dispositions it has without ASan, and a test's deliberate crash (sanedge's SIGSEGV ending) must
# die of the signal, not be reported as a finding and exit(1). A fault still kills the process;
# only ASan's stack is lost. (By hand, ASan's default options work too: it installs those
# handlers from its start-up through our sigaction(), which then does nothing else.)
san_options() {
	local dir=$1
	export ASAN_OPTIONS="halt_on_error=1:detect_leaks=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:log_path=$dir/asan${SAN_USER_ASAN_OPTIONS:+:$SAN_USER_ASAN_OPTIONS}"
	export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$dir/ubsan${SAN_USER_UBSAN_OPTIONS:+:$SAN_USER_UBSAN_OPTIONS}"
}

# san_reports DIR — print every report in DIR; status 0 if there was one (a finding).
san_reports() {
	local f found=1
	for f in "$1"/asan.* "$1"/ubsan.*; do
		[ -s "$f" ] || continue
		printf -- '----- sanitizer report %s -----\n' "$f"
		cat -- "$f"
		found=0
	done
	return "$found"
}
