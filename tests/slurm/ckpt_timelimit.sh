#!/bin/bash
# ckpt_timelimit.sh - the time limit end to end, with SIGTERM (what Slurm
# sends at a time limit and on preemption): contrib/examples/train.sbatch
# submitted with a 2-minute limit and --signal=TERM@75, so that Slurm
# itself sends SIGTERM to the job step's tasks 75 s before the limit - or
# up to 30 s earlier: slurmctld looks at time limits every 30 s, so here
# 15 to 45 s into the job, when it trains.  Every rank checkpoints and
# exits 85 (HVD_CKPT_EXIT_STATUS), the job script requeues the job, the
# second run resumes from the step the first one stopped at, and its final
# weights are bit-identical to those of an uninterrupted run.  About two
# minutes, most of it waiting for Slurm.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

TRAIN=$top_builddir/contrib/examples/train
[[ -x $TRAIN ]] || skip_all "$TRAIN not built"
plan 9
wd=$(slurm_workdir)
cd "$wd" || bail_out "cannot cd to $wd"
STEPS=20000
SEED=11

# wait_for FILE REGEX SECONDS
wait_for() {
	local deadline=$((SECONDS + $3))
	until grep -Eq -- "$2" "$1" 2>/dev/null; do
		((SECONDS < deadline)) || return 1
		sleep 0.5
	done
}

# The uninterrupted reference, on the same two nodes.
ref=$(run_timeout "$HVD_TEST_TIMEOUT" srun --mpi=pmix -N2 -n2 "$TRAIN" \
	--steps $STEPS --seed $SEED --print-every $STEPS \
	--ckpt-dir "$wd/ref-ck" --ckpt-every 100000 2>&1)
ok $? "uninterrupted run of $STEPS steps" || diag "$(tail -n 20 <<<"$ref")"
ref_sum=$(sed -n 's/^train: weights checksum //p' <<<"$ref")

# The first run is slowed down (5 ms a step: at most 9000 steps in 45 s)
# so that the signal finds it training; the requeued one runs at full
# speed (SLURM_RESTART_COUNT).
cat >"$wd/train-wrapper" <<EOF
#!/bin/bash
[[ \${SLURM_RESTART_COUNT:-0} == 0 ]] && set -- "\$@" --sleep-ms 5
exec "$TRAIN" "\$@"
EOF
chmod 755 "$wd/train-wrapper"
# The script's own --signal=B:USR1@120 line goes: sbatch 22.05 would keep
# its B: under the command line's --signal=TERM@75, and signal only the
# batch shell (whose trap forwards SIGUSR1).
script=$wd/train.sbatch
if slurm_has_horovod; then
	sed -e "s|^#SBATCH --horovod=.*|#SBATCH --horovod=ckpt-every=5000,ckpt-dir=$wd/ck|" \
		-e '/^#SBATCH --signal/d' \
		"$top_srcdir/contrib/examples/train.sbatch" >"$script"
else
	grep -v -e '^#SBATCH --horovod' -e '^#SBATCH --signal' \
		"$top_srcdir/contrib/examples/train.sbatch" >"$script"
	export HOROVOD_CHECKPOINT_DIR=$wd/ck HOROVOD_CHECKPOINT_EVERY=5000
fi
job=$(TRAIN=$wd/train-wrapper run_timeout 30 sbatch --parsable --export=ALL \
	--time=2 --signal=TERM@75 --output="$wd/job-%j.out" "$script" \
	--steps $STEPS --seed $SEED --print-every 5000)
ok $? "job submitted with --time=2 --signal=TERM@75 ($job)"
job=${job%%;*}
out=$wd/job-$job.out

# Slurm holds a requeued job back (BeginTime, about two minutes): once it
# is pending again, let it start (not in the same second: slurmd refuses a
# launch while the old run's credential is being revoked).  The requeued
# run keeps --signal=TERM@75, and on a loaded machine its 20000 steps can
# take longer than the 15 to 45 s before that signal: give it 10 minutes,
# so that exactly one run is stopped.
if wait_for "$out" "requeueing job" 200; then
	for _ in $(seq 60); do
		if [[ $(job_state "$job") == PENDING ]]; then
			run_timeout 30 scontrol update JobId="$job" \
				TimeLimit=10 >/dev/null 2>&1
			sleep 5
			run_timeout 30 scontrol update JobId="$job" \
				StartTime=now >/dev/null 2>&1
			break
		fi
		sleep 0.5
	done
	[[ $(run_timeout 30 scontrol show job "$job" 2>/dev/null) =~ TimeLimit=00:10:00 ]] ||
		run_timeout 30 scontrol update JobId="$job" TimeLimit=10 >/dev/null 2>&1
fi
state=$(wait_job "$job" 240)
is "$state" COMPLETED "the job was requeued and completed"
text=$(cat "$out" 2>/dev/null)
like "$text" "checkpoint: stop requested \(SIGTERM\): checkpoint of step [0-9]+ written; exit with status 85" \
	"first run: Slurm's SIGTERM reached the tasks, every rank checkpoints"
like "$text" "hvd-train: checkpoint written, requeueing job $job" "it exited 85 and requeued itself"
stopped=$(sed -n 's/^train: stop requested at step \([0-9]*\):.*/\1/p' <<<"$text" | head -1)
like "$text" "hvd-train: job $job .* run 2," "a second run of the same job"
like "$text" "resumed from checkpoint step ${stopped:-NONE} " \
	"it resumed from the step the first run stopped at (${stopped:-none})"
sum=$(sed -n 's/^train: weights checksum //p' <<<"$text" | tail -1)
like "$text" "train: done: $STEPS steps" "and finished the $STEPS steps"
is "$sum" "$ref_sum" "its final weights are bit-identical to the uninterrupted run's"
[[ $hvdt_failed -eq 0 ]] || diag "$(tail -40 "$out")"
