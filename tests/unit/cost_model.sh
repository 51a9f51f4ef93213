#!/bin/sh
# contrib/bench/cost-model models the allreduce that coll_select picks
# (doc/design.md, "At scale, on paper"); its copy of the choice drifted
# once (it still had the ring where libhvd had taken recursive halving).
# Its choices at the points around every limit, against coll_select's
# own at the same points (unit/test_coll_select --choices).
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-$srcdir/build}
sel=$builddir/tests/unit/test_coll_select
if ! command -v python3 >/dev/null 2>&1; then
	echo "1..0 # SKIP python3 is needed to run contrib/bench/cost-model"
	exit 0
fi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
echo "1..2"
python3 "$srcdir/contrib/bench/cost-model" --choices >"$T/model"
n=$(grep -c '^[0-9]* [0-9]* [a-z]*$' "$T/model")
if [ "$n" -ge 200 ]; then
	echo "ok 1 - cost-model --choices prints $n points"
else
	echo "not ok 1 - cost-model --choices prints $n points (expected 200 or more)"
fi
if "$sel" --choices <"$T/model" >"$T/select" &&
	diff "$T/model" "$T/select" >"$T/diff"; then
	echo "ok 2 - the model's allreduce choices are coll_select's at all $n points"
else
	echo "not ok 2 - the model's allreduce choices differ from coll_select's (< model, > coll_select):"
	grep '^[<>]' "$T/diff" | head -n 10 | sed 's/^/# /'
fi
