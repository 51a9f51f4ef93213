#!/bin/bash
# srun --horovod=elastic, one task SIGKILLed mid-training (issue 14): the
# other tasks re-form without it and finish at the smaller size with the
# accuracy of an uninterrupted run (within 0.02), every sample of every
# epoch seen exactly once (counted by the program), srun returns and no
# task is left behind; rank 0, the coordinator, is the first one killed.
# Also with two tasks per node (the node's other task stays, local ranks
# and shared memory are made again).  Without elastic the same kill makes
# every other task fail with HVD_ERR_PEER_FAILED, and srun returns.
# ELASTIC_TRIALS (default 2) single kills; the times from the kill to the
# first step at the smaller size go to the log.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/slurm/elastic_lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
[[ -x $EL_PROG ]] || skip_all "$EL_PROG is not built"
nodes=$(run_timeout 30 sinfo -h -o %D | awk '{ s += $1 } END { print s + 0 }')
n=$((nodes >= 3 ? 3 : nodes))
((n >= 2)) || skip_all "needs 2 nodes, the cluster has $nodes"
TRIALS=${ELASTIC_TRIALS:-2}
plan $((2 + 6 * TRIALS + 6 + 4))
wd=$(slurm_workdir)
cd "$wd" || bail_out "no $wd"
E=(--no-kill --kill-on-bad-exit=0 --horovod=elastic)

el_ref_ok "$wd/ref" "$n tasks on $n nodes" -N"$n" -n"$n" "${E[@]}"

for ((t = 1; t <= TRIALS; t++)); do
	out=$wd/kill$t
	victim=$(((t - 1) % n))
	at=$((15 + (t * 23) % 50))
	el_start "$out" -N"$n" -n"$n" "${E[@]}"
	el_wait_step "$out" "$at"
	el_pids_of "$out" "$n"
	el_killed_at=$(el_now)
	kill -9 "$(el_pid "$out" "$victim")"
	el_finish "$out"
	ok "$el_returned" "trial $t: task $victim killed at step $at: srun returns (status $el_st)"
	el_checks "$out" $((n - 1)) "trial $t"
done
diag "kill -> training at size $((n - 1)) (s):$el_times; median $(el_median)"

# Two tasks per node: the killed one's node-mate stays.
out=$wd/pernode
el_times=
el_start "$out" -N2 --ntasks-per-node=2 "${E[@]}"
el_wait_step "$out" 20
el_pids_of "$out" 4
el_killed_at=$(el_now)
kill -9 "$(el_pid "$out" 1)"
el_finish "$out"
ok "$el_returned" "2 nodes x 2 tasks, task 1 killed: srun returns (status $el_st)"
el_checks "$out" 3 "2 nodes x 2 tasks"

# Without elastic: today's behaviour.
out=$wd/plain
el_start "$out" -N"$n" -n"$n"
el_wait_step "$out" 20
victim=$(el_pid "$out" $((n - 1)))
kill -9 "$victim"
el_finish "$out"
ok $((el_returned || el_st == 0)) "without elastic, a task killed: srun fails (status $el_st), no hang"
is "$(grep -cE '^rank [0-9]+: HVD-5002' "$out.err")" $((n - 1)) \
	"... every other task fails with HVD_ERR_PEER_FAILED" || diag "$(tail -20 "$out.err")"
is "$(grep -c '^done' "$out")" 0 "... and nobody trains on"
is "$(grep -c '^reset' "$out")" 0 "... nor re-forms"
exit 0
