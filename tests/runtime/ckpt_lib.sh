# ckpt_lib.sh - sourced by tests/runtime/ckpt_*.sh: TAP helpers, paths, and
# how to start NP ranks of a program.
#
# Multi-rank runs go through tests/runtime/launch.sh (hvdrun, else mpirun)
# once libhvd has its collectives (hvd_init); until then, and when NP is 1,
# the program runs as one process, which the checkpointer treats as a world
# of one.  ckpt_np says how many ranks a test will get.
set -u

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
PROG=$top_builddir/tests/runtime/ckpt_prog
HVD_CKPT=$top_builddir/runtime/hvd-ckpt
LIMIT=${CKPT_TEST_LIMIT:-60}

. "$(dirname "$0")/../tap.sh"

if [ ! -x "$PROG" ] || [ ! -x "$HVD_CKPT" ]; then
	skip_all "$PROG or $HVD_CKPT not built"
fi

# Ranks available: 2 when libhvd has hvd_init and a launcher exists
# (CKPT_TEST_NP overrides; 1 runs a plain process, CKPT_PROG_SOLO=1).
LIBHVD=$top_builddir/runtime/.libs/libhvd.so
if [ -x "$top_srcdir/tests/runtime/launch.sh" ]; then
	LAUNCH=("$top_srcdir/tests/runtime/launch.sh" -np)
else
	LAUNCH=("$top_builddir/runtime/hvdrun" -np)
fi
ckpt_np() {
	if [ -n "${CKPT_TEST_NP:-}" ]; then
		echo "$CKPT_TEST_NP"
	elif [ -x "${LAUNCH[0]}" ] && [ -f "$LIBHVD" ] &&
	     nm -D --defined-only "$LIBHVD" 2>/dev/null | grep -qw hvd_init; then
		echo 2
	else
		echo 1
	fi
}

# run NP PROG ARGS...: NP ranks, under a time limit.
run() {
	local np=$1
	shift
	if [ "$np" -le 1 ]; then
		CKPT_PROG_SOLO=1 timeout -s KILL "$LIMIT" "$@"
	else
		timeout -s KILL "$LIMIT" "${LAUNCH[@]}" "$np" "$@"
	fi
}

# newest_ok DIR: step of the newest checkpoint hvd-ckpt verifies, 0 if none
newest_ok() {
	"$HVD_CKPT" verify "$1" 2>/dev/null |
		sed -n 's/^step-0*\([0-9][0-9]*\): ok.*/\1/p' | head -1 |
		grep . || echo 0
}

# as_user UID CMD...: run CMD as that user (uid, gid the same, no
# supplementary groups), with HOME=/ and CKPT_PROG_SOLO=1.  The attacks of
# the hostile-neighbour tests run as `nobody` (65534) and a second user
# (65533); can_switch_users says whether this test can (root with setpriv:
# otherwise those tests skip, saying so).
as_user() {
	local uid=$1
	shift
	HOME=/ CKPT_PROG_SOLO=1 setpriv --reuid="$uid" --regid="$uid" \
		--clear-groups -- "$@"
}
can_switch_users() {
	[ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
		as_user 65534 true 2>/dev/null
}
NOBODY=65534
OTHER=65533

W=$(mktemp -d "${TMPDIR:-/var/tmp}/ckpt-test.XXXXXX")
trap 'rm -rf "$W"' EXIT
export HOROVOD_LOG_LEVEL=${HOROVOD_LOG_LEVEL:-error}
