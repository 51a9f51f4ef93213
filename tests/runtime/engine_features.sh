#!/bin/sh
# The engine's features on several ranks (tests/runtime/engine_features.c):
# every mismatch field (new and cached), stall warning and shutdown, the
# timeline parsed as JSON with Horovod's event names, static, overlapping
# and dynamic process sets, sets that differ between ranks, join with
# uneven step counts, groups/priorities/callbacks/fp16, warm-cache latency.
. "$(dirname "$0")/engine_lib.sh"

have_launcher || { echo "1..0 # SKIP no hvdrun or mpirun"; exit 0; }
PROG=$TESTS_BIN/engine_features
plan 23

mode() {	# mode DESCRIPTION NP MODE [ARGS]: the program's TAP must pass
	desc=$1
	np=$2
	shift 2
	engine_run "$np" "$PROG" "$@" > "$TMP/out" 2> "$TMP/err"
	rc=$?
	nok=$(grep -c '^not ok' "$TMP/out")
	nok_=$(grep -c '^ok' "$TMP/out")
	[ $rc -eq 0 ] && [ "$nok" -eq 0 ] && [ "$nok_" -gt 0 ]
	st=$?
	ok $st "$desc ($nok_ checks)"
	if [ $st -ne 0 ]; then
		echo "# exit status $rc"
		diag_file "$TMP/out" 40
		diag_file "$TMP/err" 20
	fi
	return $st
}

mode "every mismatch field, fresh and cached, 2 ranks" 2 mismatch
mode "groups, priorities, callbacks, fp16 compression, 3 ranks" 3 groups
mode "join with uneven step counts, 3 ranks" 3 join

ENGINE_ENV="HOROVOD_STALL_CHECK_TIME_SECONDS=1 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=2"
mode "stall shutdown, 2 ranks" 2 stall
grep -q "waited more than 1 s" "$TMP/err" && grep -q "'lonely'" "$TMP/err" &&
	grep -q "missing rank: 1" "$TMP/err"
ok $? "stall warning names the tensor and the missing rank"
# Each rank logs the shutdown with the stalled tensors and their missing
# ranks ('lonely' among them: rank 1's probe may be listed too, first).
shutdown_logged() {	# shutdown_logged RANK
	grep -q "^hvd: \[$1\] error: hvd: stalled longer than HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=2, the engine shut down (check for rank-dependent code paths):.* ALLREDUCE 'lonely' waited [0-9]* s for rank 1" \
		"$TMP/err"
}
shutdown_logged 0 && shutdown_logged 1
ok $? "stall shutdown is reported on every rank, naming the tensor and the missing rank"

TL=$TMP/timeline.json
TL2=$TMP/timeline2.json
ENGINE_ENV="HOROVOD_TIMELINE=$TL HOROVOD_TIMELINE_MARK_CYCLES=1"
mode "ops under HOROVOD_TIMELINE, 2 ranks" 2 timeline "$TL2"
ENGINE_ENV=
json_ok() {
	if command -v python3 > /dev/null 2>&1; then
		python3 -m json.tool "$1" > /dev/null 2>&1
	elif command -v jq > /dev/null 2>&1; then
		jq . "$1" > /dev/null 2>&1
	else
		return 2
	fi
}
json_ok "$TL"
ok $? "the timeline file is valid JSON after finalize"
missing=0
for ev in NEGOTIATE_ALLREDUCE ALLREDUCE MEMCPY_IN_FUSION_BUFFER \
	MEMCPY_OUT_FUSION_BUFFER UCX_ALLREDUCE CYCLE_START; do
	grep -q "\"name\": \"$ev\"" "$TL" || { echo "# no $ev"; missing=1; }
done
ok $missing "it has Horovod's events (NEGOTIATE_ALLREDUCE, ALLREDUCE, MEMCPY_*, CYCLE_START)"
grep -q '"name": "grad.3"' "$TL" && grep -q '"ph": "X", "name": "1"' "$TL"
ok $? "tensors are trace processes; ranks' readiness is marked"
json_ok "$TL2" && grep -q '"name": "BROADCAST"' "$TL2"
ok $? "hvd_timeline_start/stop writes a second valid file"
# Crash recovery, as doc/timeline.md says: complete lines + "]".
head -n 12 "$TL" > "$TMP/crashed.json"
echo "]" >> "$TMP/crashed.json"
json_ok "$TMP/crashed.json"
ok $? "a truncated timeline plus ] is valid JSON (crash recovery)"

ENGINE_ENV="HOROVOD_PROCESS_SETS=0,1;1,2,3 HOROVOD_DYNAMIC_PROCESS_SETS=1"
mode "static, overlapping and dynamic process sets, 4 ranks" 4 psets
ENGINE_ENV=
engine_run 3 "$PROG" psetdiff > "$TMP/out" 2>&1
rc=$?
grep -q "HOROVOD_PROCESS_SETS differs between ranks" "$TMP/out" && [ $rc -eq 0 ]
st=$?
ok $st "HOROVOD_PROCESS_SETS differing between ranks fails hvd_init"
[ $st -eq 0 ] || diag_file "$TMP/out"

# Autotune: rank 0 sweeps fusion threshold and cycle time while a small
# gradient set (a --grads size file) trains; every rank must use its
# choices (results stay exact) and the CSV log gets one line per candidate.
BENCH=$top_builddir/runtime/hvd-bench
if [ -x "$BENCH" ]; then
	for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
		echo "layer$i.weight $((i * 1000))"
		echo "layer$i.bias $i"
	done > "$TMP/grads.txt"
	ENGINE_ENV="HOROVOD_AUTOTUNE=1 HOROVOD_AUTOTUNE_LOG=$TMP/autotune.csv HOROVOD_AUTOTUNE_WARMUP_SAMPLES=0 HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE=1"
	engine_run 2 "$BENCH" --grads "$TMP/grads.txt" -n 100 -w 2 \
		> "$TMP/out" 2>&1
	rc=$?
	ENGINE_ENV=
	grep -q "every tensor checked" "$TMP/out" && [ $rc -eq 0 ]
	st=$?
	ok $st "autotune on 2 ranks: results stay exact while values change"
	[ $st -eq 0 ] || diag_file "$TMP/out"
	head -n 1 "$TMP/autotune.csv" 2>/dev/null |
		grep -q '^cycle_time_ms,tensor_fusion_threshold,score$' &&
		[ "$(wc -l < "$TMP/autotune.csv")" -ge 8 ]
	st=$?
	ok $st "HOROVOD_AUTOTUNE_LOG has a header and a line per candidate"
	[ $st -eq 0 ] || diag_file "$TMP/autotune.csv"
else
	skip "hvd-bench not built"
	skip "hvd-bench not built"
fi

# Long cycles (100 ms), so that a submission that did not wake the engine shows
# however loaded the machine is (engine_features.c, latency).
ENGINE_ENV="HOROVOD_CYCLE_TIME=100"
mode "a submission wakes the engine: 4-byte latency with a warm cache, 2 ranks" 2 latency
ENGINE_ENV=
grep '^# 4-byte' "$TMP/out"

# Rank 0's engine has nothing to do while its main thread is in blocking
# allreduces over UCX, and skips idle cycles then; the set {1,2}'s ops,
# which its cycles negotiate too, must still get through.
ENGINE_ENV="HVD_SHM=0 HOROVOD_PROCESS_SETS=1,2"
mode "idle cycles skipped under blocking collectives let other sets' ops through, 3 ranks" 3 defer
ENGINE_ENV=
grep '^# rank 1' "$TMP/out"

# An idle job's cycles thin out (engine_start.c, next_cycle): over 3 s of
# nothing, far fewer wake-ups than with them every cycle time, and the op
# after it goes through at once.  Not while a process set leaves out a
# rank: the set {0,1}'s op would wait for rank 2's next cycle.
idle_switches() {
	sed -n 's/^# rank 0: idle 3 s: \([0-9]*\) .*/\1/p' "$TMP/out"
}
ENGINE_ENV="HVD_ENGINE_IDLE_MAX_MS=0"
mode "idle, cycles every cycle time, then an op, 3 ranks" 3 idle
ENGINE_ENV=
grep '^# rank' "$TMP/out"
every=$(idle_switches)
mode "idle, cycles thinned out, then an op, 3 ranks" 3 idle
grep '^# rank' "$TMP/out"
thin=$(idle_switches)
[ -n "$every" ] && [ -n "$thin" ] && [ "$every" -ge $((3 * thin)) ]
ok $? "an idle rank wakes at least 3x less often (${thin:-?} against ${every:-?} context switches in 3 s)"
ENGINE_ENV="HOROVOD_PROCESS_SETS=0,1"
mode "idle with the set {0,1}, then its op with rank 2 idle, 3 ranks" 3 idle
ENGINE_ENV=
grep '^# rank' "$TMP/out"
sets=$(idle_switches)
[ -n "$sets" ] && [ -n "$thin" ] && [ "$sets" -ge $((3 * thin)) ]
ok $? "with a set that leaves out a rank the cycles keep their pace (${sets:-?} context switches in 3 s)"
done_testing
