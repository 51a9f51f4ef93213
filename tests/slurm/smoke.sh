#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# Smoke test of the mini-cluster: a 2-node srun with PMIx wire-up, and a
# 2-node sbatch whose output file appears.  Whatever breaks here breaks
# every other Slurm test, so this one says precisely what is wrong.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

plan 6

# --- srun: PMIx ranks 0..3 over both nodes
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q -N2 -n4 --mpi=pmix \
	bash -c 'echo "$SLURMD_NODENAME ${PMIX_RANK-unset} ${SLURM_PROCID-unset}"' 2>&1)
st=$?
ok "$st" "srun -N2 -n4 --mpi=pmix ran" || diag "$out"
is "$(awk '{print $2}' <<<"$out" | sort -n | tr '\n' ' ')" "0 1 2 3 " \
	"PMIX_RANK is 0..3, once each"
is "$(awk '$2 != $3' <<<"$out")" "" "PMIX_RANK equals SLURM_PROCID"
is "$(awk '{print $1}' <<<"$out" | sort -u | tr '\n' ' ')" "node1 node2 " \
	"tasks ran on both nodes"

# --- sbatch: a 2-node batch job writes its output file
wd=$(slurm_workdir)
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
#SBATCH -N2
#SBATCH -n4
#SBATCH -t 5
srun --mpi=pmix bash -c 'echo "rank $PMIX_RANK on $SLURMD_NODENAME"'
JOB
id=$(run_timeout 60 sbatch --parsable -D "$wd" -o "$wd/out-%j.txt" \
	-J hvd-smoke "$wd/job.sh" 2>&1)
if [[ $id =~ ^[0-9]+ ]]; then
	id=${id%%;*}
	state=$(wait_job "$id")
	is "$state" COMPLETED "sbatch job $id completed"
	out=$(cat "$wd/out-$id.txt" 2>&1)
	is "$(grep -c '^rank [0-3] on node[12]$' <<<"$out")" 4 \
		"output file has the 4 ranks" || diag "$out"
else
	ok 1 "sbatch accepted the job"
	diag "$id"
	skip "no job to look at"
fi
exit 0
