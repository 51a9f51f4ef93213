#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# #SBATCH --horovod applies to every srun of the script; an srun's own
# --horovod replaces it (whole, not key by key); the batch script itself
# gets no rank variables.  salloc --horovod reaches the sruns of its shell.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
plan 6
wd=$(slurm_workdir)
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
#SBATCH -N2
#SBATCH -n4
#SBATCH -t 5
#SBATCH --horovod=fusion-mb=8
echo "batch ${HOROVOD_RANK-unset}"
srun bash -c 'echo "inherit $HOROVOD_RANK ${HOROVOD_FUSION_THRESHOLD-unset}"'
srun --horovod=cycle-ms=3 bash -c 'echo "override $HOROVOD_RANK ${HOROVOD_FUSION_THRESHOLD-unset} ${HOROVOD_CYCLE_TIME-unset}"'
unset SLURM_SPANK__SLURM_SPANK_OPTION_horovod_horovod
srun bash -c 'echo "unset ${HOROVOD_RANK-unset}"'
JOB
out=$(run_timeout "$HVD_TEST_TIMEOUT" salloc -Q -N2 --horovod=fusion-mb=4 \
	bash -c 'srun -Q -N2 -n2 bash -c "echo \$HOROVOD_RANK \$HOROVOD_FUSION_THRESHOLD"' 2>&1 | sort)
is "$out" "0 4194304
1 4194304" "salloc --horovod=fusion-mb=4 applies to srun inside salloc"

id=$(run_timeout 60 sbatch --parsable -D "$wd" -o "$wd/out-%j.txt" "$wd/job.sh" 2>&1)
if [[ ! $id =~ ^[0-9]+ ]]; then
	ok 1 "sbatch accepted the job"
	diag "$id"
	skip 4 "no job"
	exit 0
fi
id=${id%%;*}
is "$(wait_job "$id")" COMPLETED "job $id completed"
out=$(sort "$wd/out-$id.txt")
is "$(grep '^batch' <<<"$out")" "batch unset" "the batch script gets no ranks"
is "$(grep '^inherit' <<<"$out" | tr '\n' ' ')" \
	"inherit 0 8388608 inherit 1 8388608 inherit 2 8388608 inherit 3 8388608 " \
	"#SBATCH --horovod=fusion-mb=8 reaches a plain srun"
is "$(grep '^override' <<<"$out" | tr '\n' ' ')" \
	"override 0 unset 3 override 1 unset 3 override 2 unset 3 override 3 unset 3 " \
	"srun --horovod=cycle-ms=3 replaces it"
is "$(grep '^unset' <<<"$out" | tr '\n' ' ')" \
	"unset unset unset unset unset unset unset unset " \
	"unsetting SLURM_SPANK__SLURM_SPANK_OPTION_horovod_horovod stops it"
exit 0
