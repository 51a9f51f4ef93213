#!/bin/bash
# ckpt_world.sh - a checkpoint written by 2 ranks: replicated state restores
# on 1 and on 3 ranks; per-rank state on another number of ranks is a clear
# error (and on the same number it restores).
. "$(dirname "$0")/ckpt_lib.sh"

NP=$(ckpt_np)
[ "$NP" -ge 2 ] || skip_all "needs 2 ranks (libhvd collectives and a launcher)"
plan 11
run 2 "$PROG" "$W/repl" 10 5 --replicated-only >"$W/o1" 2>&1
ok $? "2 ranks write replicated state"
out=$(run 1 "$PROG" "$W/repl" 10 5 --replicated-only 2>&1)
like "$out" "^restored 10 ok \(rank 0 of 1\)" "it restores on 1 rank"
out=$(run 3 "$PROG" "$W/repl" 10 5 --replicated-only 2>&1)
like "$out" "^restored 10 ok \(rank 0 of 3\)" "and on 3 ranks"

run 2 "$PROG" "$W/mixed" 10 5 >"$W/o2" 2>&1
ok $? "2 ranks write replicated and per-rank state"
out=$(run 1 "$PROG" "$W/mixed" 10 5 --expect-error 2>&1)
is "$?" 3 "per-rank state on 1 rank: restore fails"
like "$out" "HVD_ERR_MISMATCH: .*written by 2 ranks, this run has 1: its per-rank buffer \"mine\"" \
	"with a message saying why"
out=$(run 2 "$PROG" "$W/mixed" 10 5 2>&1)
like "$out" "^restored 10 ok \(rank 0 of 2\)" "on 2 ranks it restores"

# Rank 0 removes what crashes left at the end of a restore, while the
# other ranks may already be writing the next checkpoint into this run's
# partial directory (HVD_CKPT_TEST_DELAY_MS slows every point, rank 0's
# "tidy" before that removal included).  It once took this run's partial
# directory for a crash's: the save failed ("cannot create
# .../rank-00001.bin") or, worse, committed a checkpoint without rank 1's
# file.
HVD_CKPT_TEST_DELAY_MS=300 run 2 "$PROG" "$W/tidy" 1 1 >"$W/o3" 2>&1
ok $? "a save right after a restore that found nothing, rank 0 still tidying"
got=$(newest_ok "$W/tidy")
is "$got" 1 "... is a checkpoint that verifies"
[ "$got" = 1 ] || diag_file "$W/o3"
out=$(HVD_CKPT_TEST_DELAY_MS=300 run 2 "$PROG" "$W/tidy" 2 1 2>&1)
like "$out" "^restored 1 ok \(rank 0 of 2\)" "it restores, and a save right after that"
is "$(newest_ok "$W/tidy")" 2 "... verifies too"
done_testing
