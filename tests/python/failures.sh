#!/bin/sh
# Failures reach Python on every rank, never as a hang: a rank SIGKILLed
# during DistributedOptimizer steps (the survivors raise
# HorovodInternalError naming it, and every later operation raises), and
# ranks that submit different names (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS:
# every rank raises).
. "$(dirname "$0")/lib.sh"
py_require
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
plan 4
PROG=$PYTESTS/fail_prog.py

timeout -k 10 "$PY_LIMIT" "$HVDRUN" -np 3 --grace 30 "$HVD_PYTHON" "$PROG" kill \
	>"$OUT/kill" 2>&1
n=$(grep -c 'HorovodInternalError HVD_ERR_PEER_FAILED after' "$OUT/kill")
is "$n" 2 "rank 1 SIGKILLed: ranks 0 and 2 raise HorovodInternalError (HVD_ERR_PEER_FAILED)"
[ "$n" = 2 ] || diag_file "$OUT/kill" 40
grep 'HorovodInternalError' "$OUT/kill" | sed 's/^/# /'
n=$(grep 'HorovodInternalError' "$OUT/kill" | grep -c 'rank 1 failed.*a later allreduce raised too\|a later allreduce raised too.*rank 1')
is "$n" 2 "the message names rank 1, and a later allreduce raises too"

HOROVOD_STALL_CHECK_TIME_SECONDS=1 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=2 \
	timeout -k 10 "$PY_LIMIT" "$HVDRUN" -np 2 "$HVD_PYTHON" "$PROG" stall \
	>"$OUT/stall" 2>&1
n=$(grep -c 'HorovodInternalError HVD_ERR_STALLED' "$OUT/stall")
is "$n" 2 "different names on the ranks: both raise HorovodInternalError (HVD_ERR_STALLED)"
[ "$n" = 2 ] || diag_file "$OUT/stall" 40
grep 'HorovodInternalError' "$OUT/stall" | sed 's/^/# /'
n=$(grep 'HVD_ERR_STALLED' "$OUT/stall" | grep -c 'stall\.rank')
is "$n" 2 "the message names the stalled tensors"
done_testing
