# tests/e2e/bufsize_lib.sh — sourced by the tests that drive edge_bufsize.py (after lib.sh):
# tests/e2e/t_edge_bufsize.sh (shm) and tests/rxe/t_switch_verbs_bufsize.sh (verbs).
# shellcheck shell=bash

# bufsize_one CASE MODE PYTHON FIELD [ADDR] — edge_bufsize.py CASE as MODE (none, pre); with pre,
# each of its processes must have FIELD=1 in its stats line (switched, switched_verbs). Prints
# its lines (the "# pid" ones left out) sorted, on one line.
bufsize_one() {
	local out=$TMP/$1.$2 rc=0 pid l sorted
	local -a pids=() lines=()
	as_t "$2" 60 "$3" "$E2E_DIR/edge_bufsize.py" "$1" ${5:+"$5"} >"$out.out" 2>"$out.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$1 ($2): exit $rc"; }
	# (in bash but for sort: each program run costs a lot in the emulated guest of tests/rxe)
	while IFS= read -r l || [ -n "$l" ]; do
		[[ $l =~ ^#\ pid\ ([0-9]*)$ ]] && pids+=("${BASH_REMATCH[1]}")
		[[ $l == '# pid'* ]] || lines+=("$l")
	done <"$out.out"
	if [ "$2" = pre ]; then
		for pid in "${pids[@]}"; do
			l=$(pid_line "$out.err" "$pid") || exit 1
			[ "$(field "$l" "$4")" -eq 1 ] || fail "$1: not $4: $l"
		done
	fi
	[ ${#lines[@]} -gt 0 ] || return 0
	sorted=$(printf '%s\n' "${lines[@]}" | sort)
	printf '%s ' "${sorted//$'\n'/ }"
}

# bufsize_compare ROUNDS PYTHON FIELD [ADDR] — every case over kernel TCP once, then ROUNDS
# times with both ends preloaded: the lines must be kernel TCP's each time.
bufsize_compare() {
	local rounds=$1 c k p r bad=0
	shift
	for c in close-send close-sendfile fill slow; do
		k=$(bufsize_one "$c" none "$@") || exit 1
		for r in $(seq "$rounds"); do
			p=$(bufsize_one "$c" pre "$@") || exit 1
			if [ "$k" = "$p" ]; then
				log "ok   $c round $r: $p"
			else
				log "DIFF $c round $r: tcp: $k / switch: $p"
				bad=$((bad + 1))
			fi
		done
	done
	[ "$bad" -eq 0 ] || fail "$bad cases differ from kernel TCP (above)"
}
