# engine_lib.sh - sourced by tests/runtime/engine_*.sh: TAP helpers and
# engine_run NP PROG [ARGS...], which starts NP ranks of a test program
# under tests/runtime/launch.sh when it exists (hvdrun, else mpirun),
# else hvdrun, else mpirun, always under a timeout so a hang fails.
set -u

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
LIMIT=${ENGINE_TEST_LIMIT:-120}
TESTS_BIN=$top_builddir/tests/runtime

. "$(dirname "$0")/../tap.sh"

# ENGINE_ENV="VAR=value ..." adds variables to the ranks' environment.
ENGINE_ENV=${ENGINE_ENV:-}
engine_run() {	# engine_run NP PROG [ARGS...]
	np=$1
	shift
	# shellcheck disable=SC2086
	if [ -n "$ENGINE_ENV" ]; then
		(export $ENGINE_ENV; ENGINE_ENV= engine_run "$np" "$@")
		return $?
	fi
	if [ -x "$top_srcdir/tests/runtime/launch.sh" ]; then
		timeout "$LIMIT" "$top_srcdir/tests/runtime/launch.sh" -np "$np" \
			"$@"
	elif [ -x "$top_builddir/runtime/hvdrun" ]; then
		timeout "$LIMIT" "$top_builddir/runtime/hvdrun" -np "$np" "$@"
	else
		timeout "$LIMIT" mpirun --allow-run-as-root --oversubscribe \
			-x HOROVOD_CACHE_CAPACITY -x HOROVOD_FUSION_THRESHOLD \
			-x HOROVOD_TIMELINE -x HOROVOD_TIMELINE_MARK_CYCLES \
			-x HOROVOD_STALL_CHECK_TIME_SECONDS \
			-x HOROVOD_STALL_SHUTDOWN_TIME_SECONDS \
			-x HOROVOD_PROCESS_SETS -x HOROVOD_DYNAMIC_PROCESS_SETS \
			-x HOROVOD_AUTOTUNE -x HOROVOD_AUTOTUNE_LOG -x LSAN_OPTIONS \
			-np "$np" "$@"
	fi
}

have_launcher() {
	[ -x "$top_srcdir/tests/runtime/launch.sh" ] ||
		[ -x "$top_builddir/runtime/hvdrun" ] ||
		command -v mpirun > /dev/null 2>&1
}

TMP=$(mktemp -d "${TMPDIR:-/var/tmp}/engine_test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Under --enable-sanitizers: the leaks LeakSanitizer finds in PMIx's and
# UCX's own initialisation are theirs, not ours; everything else counts.
printf 'leak:libpmix.so\nleak:libucs.so\nleak:libucp.so\nleak:libuct.so\n' \
	> "$TMP/lsan.supp"
LSAN_OPTIONS="suppressions=$TMP/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export LSAN_OPTIONS
