#!/bin/bash
# ckpt_train.sh - the training example (contrib/examples/train) learns
# (loss and accuracy improve), and killed with SIGKILL at random steps then
# restarted, ends with weights bit-identical to an uninterrupted run with
# the same seed - in synchronous and in asynchronous checkpoint mode.
. "$(dirname "$0")/ckpt_lib.sh"

TRAIN=$top_builddir/contrib/examples/train
[ -x "$TRAIN" ] || skip_all "$TRAIN not built"
NP=$(ckpt_np)
[ "$NP" -gt 1 ] || export CKPT_PROG_SOLO=1
plan 9
diag "$NP rank(s)"
RANDOM=${CKPT_TRAIN_SEED:-$$}
STEPS=300
checksum() { sed -n 's/^train: weights checksum \([0-9a-f]*\)$/\1/p' "$1"; }

run "$NP" "$TRAIN" --steps $STEPS --seed 7 --ckpt-dir "$W/ref" \
	--ckpt-every 1000 >"$W/ref.out" 2>&1
ok $? "uninterrupted run"
ref=$(checksum "$W/ref.out")
line=$(grep '^train: done' "$W/ref.out")
diag "$line"
acc=$(sed -n 's/.*test accuracy \([0-9.]*\) -> \([0-9.]*\)$/\1 \2/p' <<<"$line")
loss=$(sed -n 's/.*loss \([0-9.]*\) -> \([0-9.]*\),.*/\1 \2/p' <<<"$line")
ok "$(awk -v a="$acc" 'BEGIN { split(a, x, " "); print !(x[2] > 0.8 && x[2] > x[1] + 0.5) }')" \
	"test accuracy improves ($acc)"
ok "$(awk -v a="$loss" 'BEGIN { split(a, x, " "); print !(x[2] < x[1] / 4) }')" \
	"loss falls ($loss)"

for mode in sync async; do
	flag=
	[ $mode = async ] && flag=--async
	d=$W/$mode
	k1=$((RANDOM % 120 + 10))
	k2=$((k1 + RANDOM % 120 + 10))
	run "$NP" "$TRAIN" --steps $STEPS --seed 7 --ckpt-dir "$d" \
		--ckpt-every 25 $flag --crash-at $k1 >"$W/$mode.1" 2>&1
	rc1=$?
	run "$NP" "$TRAIN" --steps $STEPS --seed 7 --ckpt-dir "$d" \
		--ckpt-every 25 $flag --crash-at $k2 >"$W/$mode.2" 2>&1
	rc2=$?
	ok $((rc1 == 0 || rc2 == 0)) "$mode: killed with SIGKILL at steps $k1 and $k2 (exit $rc1, $rc2)"
	run "$NP" "$TRAIN" --steps $STEPS --seed 7 --ckpt-dir "$d" \
		--ckpt-every 25 $flag >"$W/$mode.3" 2>&1
	ok $? "$mode: restarted run finished ($(sed -n 's/^train: resumed from checkpoint step \([0-9]*\).*/resumed from step \1/p' "$W/$mode.3"))"
	is "$(checksum "$W/$mode.3")" "$ref" "$mode: final weights bit-identical to the uninterrupted run"
done
done_testing
