#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# The mini-cluster's promises to the other Slurm tests: every node has a
# private /tmp (Slurm's PMIx plugin needs it), PMIx is the default MPI
# plugin, and jobs share CPUs instead of queueing behind each other.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

plan 6
T=$HVD_TEST_TIMEOUT

# --- a private /tmp per node
mark=hvd-smoke-nodes-$$-$RANDOM
run_ok "create /tmp/$mark on node1" \
	srun -Q -N1 -n1 -w node1 touch "/tmp/$mark"
out=$(run_timeout "$T" srun -Q -N1 -n1 -w node2 \
	bash -c "if [ -e /tmp/$mark ]; then echo visible; else echo absent; fi" 2>&1)
is "$out" absent "node2 does not see node1's /tmp"
if [[ -e /tmp/$mark ]]; then
	ok 1 "this machine's /tmp does not see node1's /tmp"
	rm -f "/tmp/$mark"
else
	ok 0 "this machine's /tmp does not see node1's /tmp"
fi
run_timeout "$T" srun -Q -N1 -n1 -w node1 rm -f "/tmp/$mark" >/dev/null 2>&1

# --- PMIx without --mpi
out=$(run_timeout "$T" srun -Q -N1 -n2 bash -c 'echo "${PMIX_RANK-unset}"' 2>&1)
is "$(sort <<<"$out" | tr '\n' ' ')" "0 1 " "MpiDefault=pmix: PMIX_RANK set without --mpi"

# --- a job that holds every CPU does not block the next one
ncpus=$(run_timeout 30 sinfo -h -o '%C' | awk -F/ '{print $4}')
wd=$(slurm_workdir)
run_timeout "$T" srun -Q -N2 -n "${ncpus:-4}" -J "hvd-hog-$$" bash -c \
	"touch $wd/hog.\$SLURM_PROCID; sleep 20" >/dev/null 2>&1 &
hog=$!
for ((i = 0; i < 100; i++)); do
	[[ $(find "$wd" -name 'hog.*' | wc -l) -ge ${ncpus:-4} ]] && break
	sleep 0.2
done
like "$(find "$wd" -name 'hog.*' | wc -l)" "^${ncpus:-4}$" \
	"a job holding all ${ncpus:-?} CPUs runs"
run_ok "a second job starts at once beside it (srun --immediate=15)" \
	srun -Q --immediate=15 -N2 -n2 true
kill "$hog" 2>/dev/null
wait "$hog" 2>/dev/null
run_timeout 20 scancel -n "hvd-hog-$$" >/dev/null 2>&1
exit 0
