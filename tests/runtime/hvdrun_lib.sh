# hvdrun_lib.sh - sourced by tests/runtime/hvdrun_*.sh: TAP helpers and the
# paths of hvdrun and the PMIx test client.
set -u

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
HVDRUN=${HVDRUN:-$top_builddir/runtime/hvdrun}
CLIENT=${CLIENT:-$top_builddir/tests/runtime/pmix_client}
# Every hvdrun in these tests runs under timeout -k 10 $LIMIT, so a hang
# fails (SIGKILL 10 s after the SIGTERM, should hvdrun not react).
LIMIT=${HVDRUN_TEST_LIMIT:-60}

. "$(dirname "$0")/../tap.sh"

if [ ! -x "$HVDRUN" ] || [ ! -x "$CLIENT" ]; then
	echo "1..0 # SKIP $HVDRUN or $CLIENT not built"
	exit 0
fi

# A private TMPDIR: hvdrun must leave nothing behind in it.
T=$(mktemp -d "${TMPDIR:-/var/tmp}/hvdrun-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
export TMPDIR="$T"
mkdir "$T/out"
OUT=$T/out

# leftovers: number of hvdrun server directories left in $TMPDIR
leftovers() { find "$T" -maxdepth 1 -name 'hvdrun.*' | wc -l; }

# now_ms: monotonic-enough wall time in milliseconds
now_ms() { date +%s%3N; }
