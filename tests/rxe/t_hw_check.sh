#!/bin/bash
# t_hw_check — scripts/hw-check, the real-hardware report, run over the guest's rxe device with
# neither the suite nor the bench (-T -B): it finds the device whose port is ACTIVE with an IPv4
# address, that address and the RoCE v2 GID of it by itself, the ones scripts/rxe-vm set up
# (RXE_VM_DEV, RXE_VM_ADDR, RXE_VM_GID_INDEX), and writes its report (-o) with the device
# listing; with -a the same choice; a bad -r or -a and an unknown -d are refused with a message,
# not run. (hw-check's own run of the suite leaves this test out: on a real host with several
# devices its choice may rightly differ from the one asked.)
# timeout: 120
set -u
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/../e2e/lib.sh"
need_cmd ibv_devinfo
dev=${RXE_VM_DEV:?RXE_VM_DEV is not set: run through tests/rxe/run}
addr=${RXE_VM_ADDR:?}
hw=$ROOT/scripts/hw-check

rc=0
# (its environment without the guest's RXE_VM_*: hw-check must find them itself)
env -u RXE_VM_DEV -u RXE_VM_ADDR -u RXE_VM_GID_INDEX -u RXE_VM_NETDEV \
	"$hw" -T -B -o "$TMP/report.md" >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/out" "$TMP/err"; fail "hw-check -T -B: exit $rc"; }
[ -s "$TMP/report.md" ] || { show "$TMP/out" "$TMP/err"; fail "hw-check -o wrote no report"; }
grep -q '^## libsanswitch hw-check report$' "$TMP/report.md" || { show "$TMP/report.md"; fail "no report heading"; }
used=$(grep '^- used: ' "$TMP/report.md") || { show "$TMP/report.md"; fail "no 'used:' line"; }
[[ $used == "- used: $dev ("*") at $addr, GID index "* ]] ||
	{ show "$TMP/report.md"; fail "hw-check chose '$used', not $dev at $addr"; }
gid=${used#*GID index }
gid=${gid%%,*}
if [ -n "${RXE_VM_GID_INDEX:-}" ]; then
	[ "$gid" = "$RXE_VM_GID_INDEX" ] || fail "hw-check's GID index $gid, the guest's RoCE v2 GID of $addr is $RXE_VM_GID_INDEX"
fi
grep -q "^- $dev: port 1 ACTIVE, transport " "$TMP/report.md" || { show "$TMP/report.md"; fail "no listing of $dev"; }
grep -q '^not run (-T)$' "$TMP/report.md" && grep -q '^not run (-B)$' "$TMP/report.md" ||
	{ show "$TMP/report.md"; fail "-T -B: the report does not say the suite and bench were not run"; }
log "hw-check found $dev at $addr, GID index $gid: $used"

# -a: the device that serves that address, and its GID
rc=0
env -u RXE_VM_DEV -u RXE_VM_ADDR -u RXE_VM_GID_INDEX -u RXE_VM_NETDEV \
	"$hw" -T -B -a "$addr" -o "$TMP/report_a.md" >"$TMP/a.out" 2>"$TMP/a.err" || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/a.out" "$TMP/a.err"; fail "hw-check -a $addr: exit $rc"; }
grep -qF -e "$used" "$TMP/report_a.md" || { show "$TMP/report_a.md"; fail "hw-check -a $addr chose otherwise than without -a ('$used')"; }

# refusals: a message and no run
rc=0
"$hw" -r x -T -B >"$TMP/r.out" 2>"$TMP/r.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'wants a number of rounds' "$TMP/r.err" ||
	{ show "$TMP/r.out" "$TMP/r.err"; fail "-r x: exit $rc, not refused with a message"; }
rc=0
"$hw" -d no_such_dev -T -B >"$TMP/d.out" 2>"$TMP/d.err" || rc=$?
[ "$rc" -ne 0 ] && grep -q 'no device no_such_dev' "$TMP/d.err" ||
	{ show "$TMP/d.out" "$TMP/d.err"; fail "-d no_such_dev: exit $rc, not refused with a message"; }
rc=0
"$hw" -a 10.0.0.1/24 -T -B >"$TMP/p.out" 2>"$TMP/p.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'wants an IPv4 address' "$TMP/p.err" ||
	{ show "$TMP/p.out" "$TMP/p.err"; fail "-a 10.0.0.1/24: exit $rc, not refused with a message"; }
log "bad -r, -d and -a refused"
