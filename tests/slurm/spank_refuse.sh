#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# What the plugin refuses, and that it refuses before any task starts: a
# bad --horovod (srun, sbatch, salloc), a step without PMIx, a ckpt-dir the
# user cannot create; and the checkpoint directory it creates (0700).
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
plan 18
wd=$(slurm_workdir)

# jobs NAME: how many jobs slurmctld has by that name, running or ended
# (it keeps ended ones for MinJobAge): a refusal before the allocation
# leaves none.  The names are unique to this run.
jobs() {
	run_timeout 30 squeue -h -t all -n "$1" -o %i 2>/dev/null | grep -c .
}
tag=refuse-$$

# --- bad option: srun exits non-zero, the task never ran, message says
# key, value and accepted form.
out=$(run_timeout 60 srun -Q -J "$tag-srun" --horovod=ckpt-every=abc -N1 -n1 \
	touch "$wd/ran1" 2>&1)
st=$?
ok $((st == 0)) "srun with ckpt-every=abc fails (status $st)"
like "$out" 'ckpt-every=abc: expected ckpt-every=N' "message names key, value, form"
ok "$([[ -e $wd/ran1 ]] && echo 1 || echo 0)" "the task never ran"
is "$(jobs "$tag-srun")" 0 "refused before asking for an allocation (no job $tag-srun)"

out=$(run_timeout 60 srun -Q --horovod=bogus=1 -N1 -n1 true 2>&1)
like "$out" "unknown key 'bogus'" "unknown key named"

out=$(run_timeout 60 sbatch -J "$tag-sbatch" --horovod=net=infiniband --wrap true 2>&1)
st=$?
ok $((st == 0)) "sbatch with net=infiniband fails (status $st)"
like "$out" 'net=infiniband: expected net=auto\|ib\|roce\|tcp' "sbatch message"
is "$(jobs "$tag-sbatch")" 0 "no job submitted (no job $tag-sbatch)"

out=$(run_timeout 60 salloc -J "$tag-salloc" --horovod=ckpt-dir=../x -N1 true 2>&1)
st=$?
ok $((st == 0)) "salloc with a relative ckpt-dir fails (status $st)"
is "$(jobs "$tag-salloc")" 0 "no allocation made (no job $tag-salloc)"

# --- srun's check bypassed (the option injected straight into the job
# environment): slurmstepd parses it again and fails the step.
out=$(_SLURM_SPANK_OPTION_horovod_horovod=ckpt-every=abc run_timeout 60 \
	srun -Q -N1 -n1 touch "$wd/ran3" 2>&1)
like "$out" 'slurmstepd.*ckpt-every=abc: expected' "slurmstepd re-validates the option"
ok "$([[ -e $wd/ran3 ]] && echo 1 || echo 0)" "... and the task never ran"

# --- not PMIx: refused in task_init, the program never starts.
out=$(run_timeout 60 srun -Q --horovod --mpi=none -N2 -n2 touch "$wd/ran2" 2>&1)
st=$?
ok $((st == 0)) "srun --mpi=none --horovod fails (status $st)"
like "$out" '--mpi=pmix.*MpiDefault=pmix' "message says --mpi=pmix or MpiDefault=pmix"
ok "$([[ -e $wd/ran2 ]] && echo 1 || echo 0)" "the task never started"

# --- checkpoint directory: created by the task's user, mode 0700.
out=$(run_timeout 60 srun -Q --horovod=ckpt-dir="$wd/ck/%j",ckpt-every=5 -N1 -n1 \
	bash -c 'echo "$HOROVOD_CHECKPOINT_DIR"' 2>&1)
is "$(stat -c '%a %U' "$out" 2>&1)" "700 $(id -un)" "ckpt dir $out created, 0700, by the job's user"
out=$(run_timeout 60 srun -Q --horovod=ckpt-dir=/proc/none/x -N1 -n1 true 2>&1)
st=$?
ok $((st == 0)) "uncreatable ckpt-dir fails the step (status $st)"
like "$out" 'ckpt-dir: cannot create /proc/none: No such file' "message says why"
exit 0
