#!/bin/bash
# srun --horovod=elastic running an unchanged Horovod elastic script
# (tests/python/elastic_prog.py) on 3 nodes, one task each; one task
# SIGKILLed mid-training: srun returns, the other two finish at size 2
# with the accuracy of an uninterrupted run (within ELASTIC_ACC_TOL, 0.03),
# every sample of every epoch seen exactly once, no task left behind.  The
# time from the kill to the first step at size 2 goes to the log.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/python/lib.sh"
. "$top_srcdir/tests/slurm/elastic_lib.sh"
py_require
slurm_has_horovod || skip_all "srun has no --horovod (the plugin is not loaded)"
case $top_builddir in
/tmp/*) skip_all "the build tree is under /tmp, which the nodes do not share" ;;
esac
nodes=$(run_timeout 30 sinfo -h -o %D | awk '{ s += $1 } END { print s + 0 }')
((nodes >= 3)) || skip_all "needs 3 nodes, the cluster has $nodes"
EL_TOL=${ELASTIC_ACC_TOL:-0.03}
# every rank imports torch: slow on a busy machine
((HVD_TEST_TIMEOUT >= 300)) || HVD_TEST_TIMEOUT=300
PROG=$PYTESTS/elastic_prog.py
NTRAIN=1920
plan 8
wd=$(slurm_workdir)
cd "$wd" || bail_out "no $wd"
E=(--no-kill --kill-on-bad-exit=0 --horovod=elastic -N3 -n3)

# start OUT: the training in the background (srun's status to OUT.rc)
start() {
	rm -f "$1" "$1.err" "$1.rc"
	el_t0=$SECONDS
	(
		ELASTIC_STEP_MS=30 run_timeout "$HVD_TEST_TIMEOUT" srun "${E[@]}" \
			"$HVD_PYTHON" "$PROG" 3 >"$1" 2>"$1.err"
		echo $? >"$1.rc"
	) &
	el_bg=$!
}
acc_of() { awk '$1 == "done" && $3 == 0 { print $11 }' "$1"; }
sizes_of() { awk '$1 == "done" { print $5 }' "$1" | sort | uniq -c | awk '{ print $1 "x" $2 }'; }
epochs_ok() { # every epoch: all samples once, none twice, none missed
	awk -v n=$NTRAIN '$1 == "epoch" { e++; if ($6 != n || $10 != 0 || $12 != 0) bad++ }
	     END { exit !(e == 3 && !bad) }' "$1"
}
wait_line() { # OUT AWK-CONDITION
	local i
	for ((i = 0; i < 6000; i++)); do
		[[ -f $1.rc ]] && return 1
		awk "$2 { f = 1 } END { exit !f }" "$1" 2>/dev/null && return 0
		sleep 0.02
	done
	return 1
}
pid_of() { awk -v r="$2" '$1 == "start" && $3 == r { print $7; exit }' "$1"; }

out=$wd/pyref
start "$out"
el_finish "$out"
ref=$(acc_of "$out")
is "$(cat "$out.rc")-$(sizes_of "$out")" "0-3x3" "uninterrupted: 3 tasks on 3 nodes finish at size 3" ||
	diag "$(tail -15 "$out.err")"
epochs_ok "$out"
ok $? "... every sample of every epoch once (accuracy $ref)"

out=$wd/pykill
start "$out"
wait_line "$out" '$1 == "step" && $2 >= 50'
el_pids="$(pid_of "$out" 0) $(pid_of "$out" 1) $(pid_of "$out" 2)"
tk=$(el_now)
kill -9 "$(pid_of "$out" 1)"
el_finish "$out"
ok "$el_returned" "task 1 SIGKILLed at step 50: srun returns (status $el_st)"
is "$(sizes_of "$out")" "2x2" "... the two others finish at size 2" || {
	diag "$(tail -5 "$out")"
	diag "$(grep -v 'engine:\|collectives:' "$out.err" | tail -15)"
}
a=$(acc_of "$out")
el_close "$a" "$ref"
ok $? "... accuracy $a, within $EL_TOL of the uninterrupted $ref"
epochs_ok "$out"
ok $? "... every sample of every epoch seen exactly once across the change"
# shellcheck disable=SC2086 # one pid a word
is "$(el_left $el_pids)" "" "... no task left behind"
d=$(awk -v tk="$tk" '$1 == "step" && $6 == 2 { sub("t=", "", $7); printf "%.3f", $7 - tk; exit }' "$out")
[[ -n $d ]]
ok $? "... training went on at size 2 ${d}s after the kill"
exit 0
