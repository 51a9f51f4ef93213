#!/bin/bash
# ckpt_crash.sh - crash injection: a rank is killed with SIGKILL at random
# points of a checkpoint write (20 trials); the restart must resume from
# the newest complete checkpoint - never a torn one - and finish.
#
# Even trials stop a rank at a named point of the commit protocol
# (HVD_CKPT_TEST_CRASH=point:step:rank: in the middle of a data file, after
# the data, after the manifest, after the rename, after `latest`...); odd
# trials slow the writes down (HVD_CKPT_TEST_DELAY_MS) and kill -9 a rank
# from outside after a random delay.
. "$(dirname "$0")/ckpt_lib.sh"

NP=$(ckpt_np)
TRIALS=${CKPT_CRASH_TRIALS:-20}
POINTS=(begin mid-file written manifest renamed latest)
plan $((TRIALS * 4))
diag "$NP rank(s), $TRIALS trials"
RANDOM=${CKPT_CRASH_SEED:-$$}
export HVD_CKPT_TEST_CHUNK=16K    # many chunks per file: a real mid-file cut
export CKPT_PROG_PIDDIR          # where ranks leave their pids

for t in $(seq 1 "$TRIALS"); do
	d=$W/t$t
	CKPT_PROG_PIDDIR=$W/pids$t
	mkdir -p "$CKPT_PROG_PIDDIR"
	rank=$((RANDOM % NP))
	if [ $((t % 2)) -eq 0 ]; then
		point=${POINTS[$((RANDOM % ${#POINTS[@]}))]}
		step=$(((RANDOM % 6 + 2) * 5))
		case $point in	# rank 0 alone commits
		manifest|renamed|latest) rank=0 ;;
		esac
		what="$point of step $step on rank $rank"
		HVD_CKPT_TEST_CRASH=$point:$step:$rank \
			run "$NP" "$PROG" "$d" 40 5 --bytes 262144 \
			>"$W/out1" 2>&1
		rc=$?
	else
		delay=$(printf '0.%02d' $((RANDOM % 60 + 5)))
		what="kill -9 of rank $rank after ${delay}s"
		HVD_CKPT_TEST_DELAY_MS=4 \
			run "$NP" "$PROG" "$d" 400 5 --bytes 262144 \
			>"$W/out1" 2>&1 &
		pid=$!
		# the random delay counts from the victim's start
		for _ in $(seq 100); do
			[ -s "$CKPT_PROG_PIDDIR/$rank" ] && break
			sleep 0.1
		done
		sleep "$delay"
		victim=$(cat "$CKPT_PROG_PIDDIR/$rank" 2>/dev/null)
		[ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
		wait $pid
		rc=$?
	fi
	ok $((rc == 0)) "trial $t: killed ($what), exit status $rc"
	want=$(newest_ok "$d")
	out=$(run "$NP" "$PROG" "$d" $((want + 10)) 5 --bytes 262144 \
		2>"$W/err2")
	rc=$?
	got=$(printf '%s\n' "$out" | sed -n 's/^restored \([0-9]*\) .*/\1/p' |
	      head -1)
	is "$got" "$want" "trial $t: restart resumed from the newest complete checkpoint (step $want)"
	like "$out" "^restored [0-9]+ ok" "trial $t: restored state is exactly that step's"
	like "$out" "^done $((want + 10))\$" "trial $t: restart finished (exit $rc)"
	[ "$rc" -ne 0 ] && diag_file "$W/err2"
done
done_testing
