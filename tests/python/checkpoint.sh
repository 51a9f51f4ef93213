#!/bin/sh
# hvd.torch.Checkpoint through the PyTorch example (contrib/examples/
# train.py, 2 ranks): killed with SIGKILL at a random step and restarted, a
# run ends with weights bit-identical to an uninterrupted one; SIGTERM makes
# it write a checkpoint and exit 85, and the rerun resumes and ends
# identical too; --fp16-allreduce trains.
. "$(dirname "$0")/lib.sh"
py_require
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
plan 7
TRAIN=$top_srcdir/contrib/examples/train.py
STEPS=120
train() { # dir [options...]
	d=$1
	shift
	timeout -k 10 "$PY_LIMIT" "$HVDRUN" -np 2 "$HVD_PYTHON" "$TRAIN" \
		--steps $STEPS --ckpt-dir "$d" --ckpt-every 20 --print-every 40 "$@"
}
sum_of() { sed -n 's/^train.py: weights checksum //p' "$1"; }

train "$OUT/ref" >"$OUT/ref.log" 2>&1
ref=$(sum_of "$OUT/ref.log")
[ -n "$ref" ]
ok $? "uninterrupted run: weights checksum $ref"
[ -n "$ref" ] || diag_file "$OUT/ref.log" 30

# A random step after the first checkpoint (21..STEPS-2), from the clock:
# a different one every run.
at=$(( $(date +%s%N | cut -c10-18 | sed 's/^0*//;s/^$/0/') % (STEPS - 23) + 21 ))
train "$OUT/kill" --crash-at $at >"$OUT/kill.log" 2>&1
rc=$?
[ $rc -ne 0 ] && ! grep -q 'weights checksum' "$OUT/kill.log"
ok $? "SIGKILL after step $at: the run stopped (status $rc)"
train "$OUT/kill" >"$OUT/kill2.log" 2>&1
got=$(sum_of "$OUT/kill2.log")
is "$got" "$ref" "restarted: resumed ($(grep -o 'resuming at step [0-9]*' "$OUT/kill2.log")) and ended bit-identical"
[ "$got" = "$ref" ] || diag_file "$OUT/kill2.log" 30

# hvdrun itself in the background (its own --timeout), to signal it
"$HVDRUN" -np 2 --timeout "$PY_LIMIT" "$HVD_PYTHON" "$TRAIN" --steps $STEPS \
	--ckpt-dir "$OUT/term" --ckpt-every 20 --print-every 40 --sleep-ms 40 \
	>"$OUT/term.log" 2>&1 &
pid=$!
# SIGTERM to hvdrun, which forwards it to the ranks, once training runs
i=0
while [ $i -lt 600 ] && ! grep -q '^step ' "$OUT/term.log"; do
	sleep 0.1
	i=$((i + 1))
done
kill -TERM $pid
wait $pid
rc=$?
# (hvdrun itself, signalled, exits 128 + 15; srun gives the ranks' 85)
is "$rc" 143 "SIGTERM to hvdrun: forwarded, hvdrun exits 143"
grep -q 'stopped by a signal after step .*exit 85' "$OUT/term.log" &&
	grep -q 'checkpoint of step [0-9]* written; exit with status 85' "$OUT/term.log"
ok $? "the ranks wrote a checkpoint and exited with status 85"
[ "$rc" = 143 ] || diag_file "$OUT/term.log" 30
train "$OUT/term" >"$OUT/term2.log" 2>&1
got=$(sum_of "$OUT/term2.log")
is "$got" "$ref" "rerun after SIGTERM: resumed and ended bit-identical"
[ "$got" = "$ref" ] || diag_file "$OUT/term2.log" 30

timeout -k 10 "$PY_LIMIT" "$HVDRUN" -np 2 "$HVD_PYTHON" "$TRAIN" --steps 200 \
	--no-ckpt --fp16-allreduce --print-every 100 >"$OUT/fp16.log" 2>&1
acc=$(sed -n 's/.*test accuracy [0-9.]* -> \([0-9.]*\)$/\1/p' "$OUT/fp16.log")
"$HVD_PYTHON" -c "import sys; sys.exit(not float('${acc:-0}') > 0.7)"
ok $? "--fp16-allreduce: trains (test accuracy ${acc:-?})"
[ -n "$acc" ] || diag_file "$OUT/fp16.log" 30
done_testing
