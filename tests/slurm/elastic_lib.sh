# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # el_* results are the caller's to read;
# top_builddir comes from lib.sh, el_pids and el_killed_at from the caller
# tests/slurm/elastic_lib.sh: sourced by the elastic Slurm tests
# (elastic_kill.sh, elastic_node.sh, elastic_partition.sh) after lib.sh.
#
#	el_start OUT SRUN-ARGS...   srun ... elastic_train in the background
#	el_wait_step OUT N          until rank 0 printed step N
#	el_pid OUT RANK             the pid rank RANK printed
#	el_pids_of OUT N            el_pids: those of ranks 0..N-1
#	el_finish OUT               wait for it; its status in el_st,
#	                            el_returned 0 when srun ended by itself
#	el_ref_ok OUT DESC SRUN-ARGS... an uninterrupted run (2 results)
#	el_checks OUT SIZE DESC     the common assertions (5 results)
#	el_jobdir DIR NAME          cd to DIR/jobs/NAME (a cluster's own)
#	node_pids NODE              every process of a mini-cluster node
#
# The training program is tests/runtime/elastic_train (its output format is
# in its header).  ELASTIC_STEP_MS (default 20) slows each step so that a
# kill lands mid-training.

EL_PROG=$top_builddir/tests/runtime/elastic_train
EL_EPOCHS=${EL_EPOCHS:-4}
EL_TOL=${ELASTIC_ACC_TOL:-0.02}
el_times=

el_now() { date +%s.%N; }

el_start() { # OUT SRUN-ARGS...
	local out=$1
	shift
	rm -f "$out" "$out.err" "$out.rc"
	(
		ELASTIC_STEP_MS=${ELASTIC_STEP_MS:-20} run_timeout "$HVD_TEST_TIMEOUT" \
			srun "$@" "$EL_PROG" "$EL_EPOCHS" >"$out" 2>"$out.err"
		echo $? >"$out.rc"
	) &
	el_bg=$!
}

el_wait_step() { # OUT N
	local i
	for ((i = 0; i < 3000; i++)); do
		[[ -f $1.rc ]] && return 1
		awk -v n="$2" '$1 == "step" && $2 >= n { f = 1 } END { exit !f }' \
			"$1" 2>/dev/null && return 0
		sleep 0.02
	done
	return 1
}

el_pid() { # OUT RANK
	awk -v r="$2" '$1 == "start" && $3 == r { print $7; exit }' "$1" 2>/dev/null
}

el_pids_of() { # OUT N: el_pids, the pids ranks 0..N-1 printed
	local r
	el_pids=
	for ((r = 0; r < $2; r++)); do el_pids="$el_pids $(el_pid "$1" "$r")"; done
}

el_finish() { # OUT: el_st is srun's status; el_returned says it ended
	wait "$el_bg" 2>/dev/null
	el_st=$(cat "$1.rc" 2>/dev/null || echo none)
	el_returned=1
	# run_timeout's own kill says so in OUT.err: its 124 or 137 is not
	# srun returning (a task's SIGKILL gives srun 137 as well).
	[[ $el_st =~ ^[0-9]+$ ]] && ! grep -q '^# timed out after' "$1.err" &&
		el_returned=0
}

el_acc() { awk '$1 == "done" { print $9 }' "$1"; }

# el_ref OUT SRUN-ARGS...: an uninterrupted run; its accuracy in el_ref_acc.
el_ref() {
	local out=$1
	shift
	el_start "$out" "$@"
	el_finish "$out"
	el_ref_acc=$(el_acc "$out")
}

# el_ref_ok OUT DESC SRUN-ARGS...: el_ref, and two results: "DESC" (the
# tasks) finished, with an accuracy.
el_ref_ok() {
	local out=$1 desc=$2
	shift 2
	el_ref "$out" "$@"
	is "$(cat "$out.rc")" 0 "uninterrupted: $desc finish"
	[[ -n $el_ref_acc ]]
	ok $? "... with an accuracy ($el_ref_acc)" || diag "$(tail -20 "$out.err")"
}

# el_jobdir DIR NAME: make DIR/jobs/NAME, where the jobs of a cluster of
# the test's own (DIR) can write, and cd there; the path in wd.
el_jobdir() {
	wd=$1/jobs/$2
	mkdir -p "$wd"
	chmod 755 "$1/jobs" "$wd"
	cd "$wd" || bail_out "no $wd"
}

el_close() { awk -v a="$1" -v b="$2" -v t="$EL_TOL" \
	'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }

# el_checks OUT SIZE DESC: finished at SIZE, accuracy near the reference,
# every epoch's samples seen once, nobody left behind (PIDS), and the time
# from el_killed_at to the first step at SIZE appended to el_times.
el_checks() {
	local out=$1 size=$2 desc=$3 a d p left=
	is "$(awk '$1 == "done" { print $3 }' "$out")" "$size" \
		"$desc: the survivors finish at size $size" || {
		diag "$(tail -5 "$out")"
		diag "$(grep -v 'engine:\|collectives:' "$out.err" | tail -15)"
	}
	a=$(el_acc "$out")
	el_close "$a" "$el_ref_acc"
	ok $? "$desc: accuracy $a, within $EL_TOL of the uninterrupted $el_ref_acc"
	awk '$1 == "epoch" && $3 == "seen-once" { n++; if ($4 != $6) bad++ }
	     END { exit !(n == '"$EL_EPOCHS"' && !bad) }' "$out"
	ok $? "$desc: every sample of each of the $EL_EPOCHS epochs seen exactly once"
	# shellcheck disable=SC2086 # one pid a word
	left=$(el_left $el_pids)
	is "$left" "" "$desc: no rank left behind"
	d=$(awk -v tk="$el_killed_at" -v n="$size" '$1 == "step" && $6 == n {
		sub("t=", "", $7); printf "%.3f", $7 - tk; exit }' "$out")
	el_times="$el_times ${d:-?}"
	[[ -n $d ]]
	ok $? "$desc: training went on at size $size ${d}s after the failure"
}

# el_left PID...: those still alive 15 s on (Slurm's KillWait is 5 s).
el_left() {
	local p left i
	for ((i = 0; i < 75; i++)); do
		left=
		for p in "$@"; do
			[[ -n $p ]] && kill -0 "$p" 2>/dev/null && left="$left $p"
		done
		[[ -z $left ]] && break
		sleep 0.2
	done
	echo "$left"
}

el_median() {
	tr ' ' '\n' <<<"$el_times" | grep -E '^[0-9.]+$' | sort -n |
		awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}

# node_pids NODE: every process of a mini-cluster node, which are those in
# its slurmd's mount namespace (slurmd, slurmstepd, the tasks).
node_pids() {
	local dir=${2:-$HVD_MINICLUSTER_DIR} pid ns p
	pid=$(cat "$dir/run/slurmd-$1.pid" 2>/dev/null) || return 1
	ns=$(readlink "/proc/$pid/ns/mnt") || return 1
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/ns/mnt" 2>/dev/null) == "$ns" ]] && echo "${p#/proc/}"
	done
}
