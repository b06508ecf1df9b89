# tests/e2e/shapes_lib.sh — sourced by the tests that drive shapes.py (after lib.sh).
# shellcheck shell=bash

# shapes_run NAME SRVMODE CLIMODE SHAPE SIZE REQS CHUNK [ENV...] — shapes.py's server in SHAPE for
# $CONNS connections (as SRVMODE: pre, none) and its client (as CLIMODE), with ENV (VAR=value) at
# both (and CLIENT_ENV, one VAR=value, at the client alone); fails on any exit status but 0 (a wrong byte makes the client exit 1). Outputs in
# $TMP/NAME.{cli,srv}.{out,err}; RUN_WORST: the slowest first request, whole milliseconds.
RUN_WORST=
shapes_run() {
	local name=$1 sm=$2 cm=$3 shape=$4 size=$5 reqs=$6 chunk=$7 rc=0 srv_rc=0
	shift 7
	start_pf "$name.srv" "$sm" env "$@" "$PY" "$E2E_DIR/shapes.py" server "$shape" '{PORTFILE}' "$CONNS"
	as_t "$cm" 60 env "$@" ${CLIENT_ENV:+"$CLIENT_ENV"} "$PY" "$E2E_DIR/shapes.py" client "$SERVER_PORT" "$CONNS" "$size" "$reqs" \
		"$chunk" "${CLIENT_FORK:-0}" >"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 30 || srv_rc=$?
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	[ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] || {
		show "$TMP/$name.cli.out" "$TMP/$name.cli.err" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: client exit $rc, server exit $srv_rc"
	}
	# (the lines here and below read by the shell, not sed: see lib.sh's _now)
	RUN_WORST=
	lines_with "$TMP/$name.cli.out" 'client ok conns=' &&
		[[ $LINES =~ ^client\ ok\ conns=[0-9]*\ worst_ms=([0-9]*)\. ]] && RUN_WORST=${BASH_REMATCH[1]}
	[ -n "$RUN_WORST" ] || { show "$TMP/$name.cli.out"; fail "$name: no 'client ok' line"; }
}

# role_lines NAME ROLE — the stats lines of the processes that printed "# pid P ROLE".
role_lines() {
	local pid f l
	for f in "$TMP/$1.cli.out" "$TMP/$1.srv.out"; do
		lines_with "$f" '# pid ' || continue
		while IFS= read -r l; do
			[[ $l =~ ^#\ pid\ ([0-9]*)\ (.*)$ ]] && [ "${BASH_REMATCH[2]}" = "$2" ] || continue
			pid=${BASH_REMATCH[1]}
			pid_line "${f%.out}.err" "$pid" || return 1
		done <<<"$LINES"
	done
}

# sum NAME ROLE FIELD — FIELD summed over the stats lines of ROLE's processes.
sum() {
	local l t=0
	while IFS= read -r l; do
		field_is "$l" "$3"
		t=$((t + FIELD))
	done < <(role_lines "$1" "$2")
	echo "$t"
}
