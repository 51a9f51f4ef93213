#!/bin/bash
# ckpt_signal.sh - the preemption path end to end on the mini-cluster:
#  1. srun -N2 -n2 train; SIGUSR1 to srun (what the job script forwards):
#     every rank checkpoints, exits 85; the checkpoint verifies; a new srun
#     resumes from it and finishes;
#  2. contrib/examples/train.sbatch; SIGUSR1 to the batch shell only (what
#     --signal=B:USR1@120 does): the job checkpoints, requeues itself, and
#     the second run resumes and finishes.
# With the horovod SPANK plugin loaded the checkpoint settings come from
# --horovod=ckpt-...; without it from HOROVOD_CHECKPOINT_* in the
# environment (srun and sbatch pass it on), so the path is tested either way.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

TRAIN=$top_builddir/contrib/examples/train
HVD_CKPT=$top_builddir/runtime/hvd-ckpt
[[ -x $TRAIN && -x $HVD_CKPT ]] || skip_all "$TRAIN or $HVD_CKPT not built"
plan 11
wd=$(slurm_workdir)
cd "$wd" || bail_out "cannot cd to $wd"
ck=$wd/ck
if slurm_has_horovod; then
	hvdopt=(--horovod=ckpt-dir=$ck,ckpt-every=0)
	diag "settings through srun --horovod"
else
	hvdopt=()
	export HOROVOD_CHECKPOINT_DIR=$ck HOROVOD_CHECKPOINT_EVERY=0
	diag "no --horovod in srun (plugin not loaded): settings through the environment"
fi

# wait_for FILE REGEX SECONDS
wait_for() {
	local deadline=$((SECONDS + $3))
	until grep -Eq -- "$2" "$1" 2>/dev/null; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# --- 1. srun, SIGUSR1
srun --mpi=pmix -N2 -n2 "${hvdopt[@]}" "$TRAIN" --steps 1000000 \
	--sleep-ms 5 --print-every 100 >"$wd/run1.out" 2>&1 &
srun_pid=$!
# watchdog; its own fds, so that a leftover sleep holds no pipe open
(sleep "$HVD_TEST_TIMEOUT"; kill -9 $srun_pid) >/dev/null 2>&1 </dev/null &
dog=$!
wait_for "$wd/run1.out" '^step +200 ' 60
ok $? "training runs on 2 nodes"
kill -USR1 $srun_pid
wait $srun_pid
rc=$?
kill $dog 2>/dev/null
is "$rc" 85 "SIGUSR1 to srun: every rank checkpoints and exits 85"
like "$(cat "$wd/run1.out")" "stop requested \(SIGUSR1\): checkpoint of step [0-9]+ written" \
	"rank 0 says the checkpoint is written"
out=$("$HVD_CKPT" verify "$ck")
ok $? "the checkpoint verifies (hvd-ckpt verify)" || diag "$out"
step=$(sed -n 's/^step-0*\([0-9]*\): ok.*/\1/p' <<<"$out" | head -1)
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun --mpi=pmix -N2 -n2 "${hvdopt[@]}" \
	"$TRAIN" --steps $((step + 100)) --print-every 100 2>&1)
ok $? "a new srun finishes"
like "$out" "resumed from checkpoint step $step " "it resumed from step $step"

# --- 2. sbatch --requeue, SIGUSR1 to the batch shell
script=$wd/train.sbatch
if ((${#hvdopt[@]})); then
	sed "s|^#SBATCH --horovod=.*|#SBATCH --horovod=ckpt-every=50,ckpt-dir=$wd/ck2|" \
		"$top_srcdir/contrib/examples/train.sbatch" >"$script"
else
	grep -v '^#SBATCH --horovod' "$top_srcdir/contrib/examples/train.sbatch" >"$script"
	export HOROVOD_CHECKPOINT_DIR=$wd/ck2 HOROVOD_CHECKPOINT_EVERY=50
fi
job=$(TRAIN=$TRAIN run_timeout 30 sbatch --parsable --export=ALL \
	--output="$wd/job-%j.out" "$script" --steps 3000 --sleep-ms 5 \
	--print-every 500)
ok $? "job submitted ($job)"
job=${job%%;*}
wait_for "$wd/job-$job.out" '^step +500 ' 90
ok $? "the job trains"
run_timeout 30 scancel -b -s USR1 "$job"
# Slurm holds a requeued job back (BeginTime, about two minutes): let it
# start sooner, the test is about what happens when it does.  Not at once:
# slurmd refuses a launch in the same second as the revocation of the old
# run's credential ("Job credential revoked").
if wait_for "$wd/job-$job.out" "requeueing job" 60; then
	for _ in $(seq 60); do
		if [[ $(job_state "$job") == PENDING ]]; then
			sleep 5
			run_timeout 30 scontrol update JobId="$job" \
				StartTime=now >/dev/null 2>&1
			break
		fi
		sleep 0.5
	done
fi
state=$(wait_job "$job" 240)
is "$state" COMPLETED "the job requeued itself and completed"
out=$(cat "$wd/job-$job.out")
like "$out" "checkpoint written, requeueing job $job" "first run: checkpoint, requeue"
like "$out" "resumed from checkpoint step [0-9]+.*" "second run resumed from the checkpoint"
[[ $hvdt_failed -eq 0 ]] || diag "$(tail -30 "$wd/job-$job.out")"
