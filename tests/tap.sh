# tap.sh - TAP helpers for the shell tests of tests/runtime/ (sourced by
# their *_lib.sh): plan, ok, is, like, skip, skip_all, diag, diag_file and
# done_testing.  Output goes to stdout for automake's tap-driver.sh.

tap_n=0
tap_fail=0

plan() { echo "1..$1"; }
ok() {	# ok STATUS DESCRIPTION: status 0 passes
	tap_n=$((tap_n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $tap_n - $2"
	else
		echo "not ok $tap_n - $2"
		tap_fail=$((tap_fail + 1))
	fi
}
is() {	# is FOUND EXPECTED DESCRIPTION
	if [ "$1" = "$2" ]; then
		ok 0 "$3"
	else
		ok 1 "$3"
		echo "# expected: $2"
		echo "# found:    $1"
	fi
}
like() { # like TEXT REGEX DESCRIPTION
	if printf '%s\n' "$1" | grep -Eq -- "$2"; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '%s\n' "$1" | head -20 | sed 's/^/#   /'
	fi
}
skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP $1"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
diag() { echo "# $*"; }
diag_file() { sed 's/^/# /' "$1" | head -n "${2:-20}"; }
done_testing() { exit $((tap_fail > 0)); }
