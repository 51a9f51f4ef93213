#!/bin/bash
# ckpt_async.sh - asynchronous checkpoints really overlap compute: with the
# same work, the training loop is blocked much less per checkpoint than in
# synchronous mode, the whole run is shorter, and the result is the same.
. "$(dirname "$0")/ckpt_lib.sh"

NP=$(ckpt_np)
BYTES=${CKPT_ASYNC_BYTES:-$((96 << 20))}
plan 6
diag "$NP rank(s), $((BYTES >> 20)) MiB of state per rank"

# blocked FILE: "SUM MAX" of the blocked times at checkpoint steps (every
# 5th), and "ALL" blocked time over all steps
blocked() {
	awk '/^step/ { all += $4; if ($2 % 5 == 0) { s += $4; n++; if ($4 > m) m = $4 } }
	     END { if (!n) { print "9 9 9"; exit } printf "%.4f %.4f %.4f\n", s / n, m, all }' "$1"
}
for mode in sync async; do
	flag=
	[ $mode = async ] && flag=--async
	t0=$(date +%s%N)
	run "$NP" "$PROG" "$W/$mode" 20 5 --bytes "$BYTES" --compute-ms 150 \
		--times $flag >"$W/$mode.out" 2>"$W/$mode.err"
	rc=$?
	t1=$(date +%s%N)
	eval "wall_$mode=$(((t1 - t0) / 1000000))"
	ok "$rc" "$mode run finished"
	[ "$rc" -ne 0 ] && diag_file "$W/$mode.err"
done
read -r sync_mean sync_max sync_all < <(blocked "$W/sync.out")
read -r async_mean async_max async_all < <(blocked "$W/async.out")
diag "sync:  blocked per checkpoint mean ${sync_mean}s max ${sync_max}s, all steps ${sync_all}s, wall ${wall_sync} ms"
diag "async: blocked per checkpoint mean ${async_mean}s max ${async_max}s, all steps ${async_all}s, wall ${wall_async} ms"
ok "$(awk -v a="$async_mean" -v s="$sync_mean" 'BEGIN { print !(a <= 0.5 * s) }')" \
	"async blocks the loop at most half as long per checkpoint (async ${async_mean}s vs sync ${sync_mean}s; target 10%)"
ok "$(awk -v a="$async_all" -v s="$sync_all" 'BEGIN { print !(a <= 0.5 * s) }')" \
	"async: total time blocked over the run at most half the synchronous one"
# (wall times are printed, not tested: on a loaded 2-core machine they are
# mostly noise)
out=$(run "$NP" "$PROG" "$W/async" 20 5 --bytes "$BYTES" 2>&1)
like "$out" "^restored 20 ok" "the last async checkpoint (step 20) was committed and restores"
"$HVD_CKPT" verify "$W/async" >"$W/verify.out" 2>&1
ok $? "async checkpoints verify"
done_testing
