#!/bin/bash
# ckpt_lock.sh - one checkpoint directory, one run at a time: a second run
# (two job steps given the same ckpt-dir) is refused while the first holds
# the directory, with an error naming the holder; the directory is free
# again when the holder ends, by close or by SIGKILL.
. "$(dirname "$0")/ckpt_lib.sh"

NP=$(ckpt_np)
plan 10
d=$W/ck
mkdir -p "$W/pids"

# start_holder NP: a long run in the background (its launcher's pid in
# $holder); waits for its first checkpoint; rank 0's pid in $pid
start_holder() {
	rm -f "$W/pids/"*
	CKPT_PROG_PIDDIR=$W/pids run "$1" "$PROG" "$d" 1000000 10 \
		--compute-ms 2 >"$W/holder.out" 2>&1 &
	holder=$!
	for _ in $(seq 300); do
		[ -s "$W/pids/0" ] && [ -d "$d/step-00000010" ] && break
		sleep 0.1
	done
	pid=$(cat "$W/pids/0" 2>/dev/null)
}

start_holder "$NP"
ok $([ -n "$pid" ]; echo $?) "a run of $NP rank(s) holds $d (pid $pid)"
out=$(run "$NP" "$PROG" "$d" 20 10 2>&1)
is $? 1 "a second run in the same directory is refused"
like "$out" "checkpoint: $d is in use by another run \(pid $pid on [^ ,]+" \
	"the error names the holder (pid and node)"
like "$out" "destroy each other's checkpoints; wait for it to end.*or give this run a directory of its own" \
	"and says why and what to do"
ok $(grep -q '^restored' <<<"$out"; echo $((!$?))) \
	"the second run stopped at open (it restored and wrote nothing)"
out=$("$HVD_CKPT" prune "$d" 1 2>&1)
ok $([ $? -eq 2 ] && [[ $out =~ "is in use by a running job (pid $pid" ]]; echo $?) \
	"hvd-ckpt prune refuses a directory a run holds"
kill -TERM "$pid" 2>/dev/null
wait "$holder"
is $? 85 "the holder, stopped by SIGTERM, checkpoints and exits 85"
out=$(run "$NP" "$PROG" "$d" 20 10 2>&1)
like "$out" "^restored [0-9]+ ok" "once it has ended, the directory is free"

rm -rf "$d"
start_holder 1
kill -KILL "$pid" 2>/dev/null
wait "$holder" 2>/dev/null
out=$(run 1 "$PROG" "$d" 20 10 2>&1)
ok $? "a holder killed with SIGKILL leaves no stale lock"
like "$out" "^restored [1-9][0-9]* ok" "and its checkpoints restore"
done_testing
