#!/bin/bash
# t_man — every page in man/ renders without a single warning (man --warnings), and a control
# page with faults does warn; `make install DESTDIR=... PREFIX=/usr/local` puts the library,
# sanswitch-run, sanverify and every man page where they belong (the installed sanswitch-run
# names the library's place without DESTDIR), every section-1 and -8 page's program included;
# `make uninstall` with the same variables leaves no file behind.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd man
need_cmd make

# warnings PAGE — what rendering PAGE prints on stderr (the page itself goes nowhere).
warnings() {
	{ LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l -E UTF-8 "$1" >/dev/null; } 2>&1
}

# ------------------------------------------------------------ the control: a faulty page warns
cat >"$TMP/bad.1" <<'PAGE'
.TH BAD 1
.SH NAME
bad \- a page with faults
.SH DESCRIPTION
.NOSUCHMACRO x
\fBunterminated \fZ escape
PAGE
w=$(warnings "$TMP/bad.1")
[ -n "$w" ] || fail "control: a page with an unknown macro and a bad escape rendered without warnings (is --warnings on?)"
log "control: the faulty page warns: $(printf '%s' "$w" | head -n1)"

# ------------------------------------------------------------ every page renders cleanly
n=0
for p in "$ROOT"/man/*; do
	[ -f "$p" ] || continue
	w=$(warnings "$p")
	[ -z "$w" ] || { printf '%s\n' "$w" >&2; fail "$(basename -- "$p"): warnings while rendering (above)"; }
	out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l -E UTF-8 "$p" 2>/dev/null)
	grep -q '^NAME' <<<"$out" || fail "$(basename -- "$p"): rendered without a NAME section"
	n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "only $n man pages found in $ROOT/man"
log "$n man pages render without warnings"

# ------------------------------------------------------------ make install / uninstall
# The same build as the tests run (a sanitized one is built with SANITIZE=...).
MK=(make --no-print-directory -C "$ROOT")
[ -n "$SAN_KINDS" ] && MK+=("SANITIZE=${SAN_KINDS// /,}")
D=$TMP/dest
P=/usr/local
rc=0
"${MK[@]}" install DESTDIR="$D" PREFIX="$P" >"$TMP/install.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/install.out"; fail "make install DESTDIR=$D PREFIX=$P exited $rc"; }

want=("$P/lib/sanswitch/libsanswitch.so" "$P/bin/sanswitch-run" "$P/bin/sanverify")
for f in "${want[@]}"; do
	[ -f "$D$f" ] || { find "$D" -type f >&2; fail "make install: no $D$f"; }
done
cmp -s "$BUILD/libsanswitch.so" "$D$P/lib/sanswitch/libsanswitch.so" || fail "the installed library is not $BUILD/libsanswitch.so"
for f in sanswitch-run sanverify; do
	[ -x "$D$P/bin/$f" ] || fail "installed $f is not executable"
done
# The installed script finds the library where it will be once DESTDIR is the root.
grep -qxF "INSTALLED_LIB='$P/lib/sanswitch/libsanswitch.so'" "$D$P/bin/sanswitch-run" ||
	{ grep -n INSTALLED_LIB "$D$P/bin/sanswitch-run" >&2; fail "installed sanswitch-run does not name $P/lib/sanswitch/libsanswitch.so"; }
for p in "$ROOT"/man/*.[1-8]; do
	name=$(basename -- "$p")
	sec=${name##*.}
	f=$D$P/share/man/man$sec/$name
	cmp -s "$p" "$f" || { find "$D" -type f >&2; fail "man page $name not installed as $f"; }
	want+=("$P/share/man/man$sec/$name")
	# a page of section 1 or 8 documents a program: that program is installed too
	if [ "$sec" = 1 ] || [ "$sec" = 8 ]; then
		[ -x "$D$P/bin/${name%.*}" ] || [ -x "$D$P/sbin/${name%.*}" ] ||
			fail "man page $name installed, but no program ${name%.*} in $P/bin or $P/sbin"
	fi
done
nf=$(find "$D" -type f | wc -l)
log "make install: ${#want[@]} expected files in place ($nf installed)"

rc=0
"${MK[@]}" uninstall DESTDIR="$D" PREFIX="$P" >"$TMP/uninstall.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/uninstall.out"; fail "make uninstall exited $rc"; }
left=$(find "$D" ! -type d)
[ -z "$left" ] || { printf '%s\n' "$left" >&2; fail "make uninstall left files behind (above)"; }
log "make uninstall: nothing left"
