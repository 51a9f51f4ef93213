#!/bin/sh
# torch DDP scripts under hvdrun, without torchrun: hvdrun sets RANK,
# WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT,
# and two jobs started at the same time on this machine get different
# MASTER_PORTs (each hvdrun holds its port while it runs).
. "$(dirname "$0")/lib.sh"
py_require
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
plan 3
PROG=$PYTESTS/fail_prog.py
env -u MASTER_PORT -u MASTER_ADDR timeout -k 10 "$PY_LIMIT" "$HVDRUN" -np 2 \
	"$HVD_PYTHON" "$PROG" ddp >"$OUT/a" 2>&1 &
a=$!
env -u MASTER_PORT -u MASTER_ADDR timeout -k 10 "$PY_LIMIT" "$HVDRUN" -np 2 \
	"$HVD_PYTHON" "$PROG" ddp >"$OUT/b" 2>&1
st_b=$?
wait $a
st_a=$?
for j in a b; do
	eval st=\$st_$j
	n=$(grep -c '^ddp rank [01] port [0-9]* sum 3$' "$OUT/$j")
	is "$st:$n" "0:2" "job $j: init_process_group(env://) and an allreduce on 2 ranks"
	[ "$st:$n" = "0:2" ] || diag_file "$OUT/$j" 30
done
pa=$(sed -n 's/^ddp rank 0 port \([0-9]*\) .*/\1/p' "$OUT/a")
pb=$(sed -n 's/^ddp rank 0 port \([0-9]*\) .*/\1/p' "$OUT/b")
[ -n "$pa" ] && [ -n "$pb" ] && [ "$pa" != "$pb" ]
ok $? "the two jobs got different MASTER_PORTs ($pa, $pb)"
done_testing
