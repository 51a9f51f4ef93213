#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# --horovod=elastic: what would defeat it is refused before any allocation,
# read from what srun, sbatch or salloc really parsed (abbreviated options
# and SLURM_* input variables too), with a message naming the option to use;
# what passes gives the tasks HOROVOD_ELASTIC and HOROVOD_ELASTIC_MIN_SIZE.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
plan 24
wd=$(slurm_workdir)
T=$HVD_TEST_TIMEOUT
tag=elastic-$$
n=0

# jobs NAME: jobs slurmctld has by that name, running or ended.
jobs() {
	run_timeout 30 squeue -h -t all -n "$1" -o %i 2>/dev/null | grep -c .
}

# refused DESCRIPTION REGEX COMMAND...: the command fails, prints REGEX,
# never runs its task ("ran") and leaves no job behind.
refused() {
	local desc=$1 re=$2 out st=0 name
	shift 2
	n=$((n + 1))
	name=$tag-$n
	out=$(cd "$wd" && run_timeout "$T" "$@" -J "$name" --horovod=elastic \
		bash -c 'echo ran' 2>&1) || st=$?
	if [[ $st != 0 && $out =~ $re && $out != *ran* ]]; then
		ok 0 "$desc"
	else
		ok 1 "$desc"
		diag "status $st; expected to match: $re"
		diag "$out"
	fi
	is "$(jobs "$name")" 0 "... before asking for an allocation"
}

refused "srun --horovod=elastic without --no-kill: refused" \
	'without --no-kill Slurm ends the step when one of its nodes fails.*give srun --no-kill \(-k\)' \
	srun -Q -N1 -n1
refused "srun -k -K: refused" \
	'srun would end the whole step when one task exits with an error.*--kill-on-bad-exit=0' \
	srun -Q -k -K -N1 -n1
refused "srun -k --kill-on (an abbreviation): refused" \
	'--kill-on-bad-exit, -K or SLURM_KILL_BAD_EXIT' \
	srun -Q -k --kill-on -N1 -n1
refused "SLURM_KILL_BAD_EXIT=1 srun -k: refused" \
	'--kill-on-bad-exit, -K or SLURM_KILL_BAD_EXIT' \
	env SLURM_KILL_BAD_EXIT=1 srun -Q -k -N1 -n1

out=$(cd "$wd" && run_timeout "$T" srun -Q -k --kill-on-bad-exit=0 --horovod=elastic \
	-N1 -n1 bash -c 'echo "ran $HOROVOD_ELASTIC ${HOROVOD_ELASTIC_MIN_SIZE-unset}"' 2>&1)
is "$out" "ran 1 unset" "srun -k --kill-on-bad-exit=0: runs, HOROVOD_ELASTIC=1"
out=$(cd "$wd" && SLURM_NO_KILL="set" run_timeout "$T" srun -Q --horovod=elastic \
	-N1 -n1 bash -c 'echo "ran $HOROVOD_ELASTIC"' 2>&1)
is "$out" "ran 1" "SLURM_NO_KILL=set counts as --no-kill"
out=$(cd "$wd" && run_timeout "$T" srun -Q --no-k --horovod=elastic,elastic-min=2 \
	-N2 -n2 bash -c 'echo "ran $HOROVOD_ELASTIC $HOROVOD_ELASTIC_MIN_SIZE"' 2>&1)
is "$out" "ran 1 2
ran 1 2" "srun --no-k (abbreviated) -n2 elastic-min=2: both tasks get HOROVOD_ELASTIC_MIN_SIZE=2"

# elastic-min against the task count: srun knows it when -n is given...
out=$(cd "$wd" && run_timeout "$T" srun -Q -k -J "$tag-min" -n2 \
	--horovod=elastic,elastic-min=3 bash -c 'echo ran' 2>&1)
like "$out" 'elastic-min=3: the step has 2 tasks; expected elastic-min at most 2' \
	"srun -n2 elastic-min=3: refused" || diag "$out"
is "$(jobs "$tag-min")" 0 "... before asking for an allocation"
# ... and once the step exists otherwise (srun exits before the launch).
out=$(cd "$wd" && run_timeout "$T" srun -Q -k -N2 --ntasks-per-node=1 \
	--horovod=elastic,elastic-min=3 bash -c 'echo ran' 2>&1)
st=$?
ok $((st == 0)) "srun -N2 --ntasks-per-node=1 elastic-min=3 fails (status $st)"
like "$out" 'the step has 2 tasks' "... saying the step has 2 tasks" || diag "$out"
is "$(grep -c '^ran' <<<"$out")" 0 "... and no task ran"
# ... and slurmstepd checks again when srun's check is bypassed.
out=$(cd "$wd" && _SLURM_SPANK_OPTION_horovod_horovod=elastic,elastic-min=5 \
	run_timeout "$T" srun -Q -k -n2 bash -c 'echo ran' 2>&1)
like "$out" 'slurmstepd.*elastic-min=5: the step has 2 tasks' \
	"bypassing srun's check: slurmstepd refuses" || diag "$out"
is "$(grep -c '^ran' <<<"$out")" 0 "... and no task ran"

# sbatch and salloc: the job itself must outlive a failed node.
out=$(cd "$wd" && run_timeout "$T" sbatch -J "$tag-sb" --horovod=elastic --wrap true 2>&1)
like "$out" 'without --no-kill Slurm ends the job when one of its nodes fails.*give sbatch --no-kill' \
	"sbatch --horovod=elastic without --no-kill: refused" || diag "$out"
is "$(jobs "$tag-sb")" 0 "... nothing submitted"
out=$(cd "$wd" && run_timeout "$T" salloc -Q -J "$tag-sa" --horovod=elastic -N1 true 2>&1)
like "$out" 'give salloc --no-kill' "salloc --horovod=elastic without --no-kill: refused" ||
	diag "$out"
is "$(jobs "$tag-sa")" 0 "... nothing allocated"
cat >"$wd/elastic.sh" <<'JOB'
#!/bin/bash
#SBATCH -N1 -n2 -t 5 --no-kill
#SBATCH --horovod=elastic,elastic-min=1
srun -k bash -c 'echo "task $HOROVOD_ELASTIC $HOROVOD_ELASTIC_MIN_SIZE"'
JOB
id=$(cd "$wd" && run_timeout 60 sbatch --parsable -o "$wd/elastic-%j.out" "$wd/elastic.sh" 2>&1)
id=${id%%;*}
if [[ $id =~ ^[0-9]+$ ]]; then
	is "$(wait_job "$id")" COMPLETED "#SBATCH --no-kill --horovod=elastic: the job ran"
	is "$(sort "$wd/elastic-$id.out")" "task 1 1
task 1 1" "... and its srun -k tasks got the elastic variables"
else
	ok 1 "sbatch accepted the elastic job"
	diag "$id"
	skip 1 "no job"
fi
exit 0
