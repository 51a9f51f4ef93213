#!/bin/bash
# Benchmark, not a test: median wall time of `srun -N2 -n4 true` with and
# without --horovod, interleaved in the same run (the machine is noisy), and
# their ratio (target: at most 1.15).
#   tests/slurm/spank_bench.sh [RUNS]      (default 20 of each)
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

runs=${1:-20}
slurm_has_horovod || skip_all "srun has no --horovod"
t() { # command...: seconds, with ms resolution
	local s e
	s=$(date +%s%N)
	run_timeout 60 "$@" >/dev/null 2>&1 || echo "failed: $*" >&2
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
plain=()
hvd=()
t srun -N2 -n4 true >/dev/null # warm up (first step of a job is slower)
for ((i = 0; i < runs; i++)); do
	plain+=("$(t srun -N2 -n4 true)")
	hvd+=("$(t srun --horovod -N2 -n4 true)")
done
mp=$(printf '%s\n' "${plain[@]}" | median)
mh=$(printf '%s\n' "${hvd[@]}" | median)
echo "runs: $runs each, interleaved"
echo "srun -N2 -n4 true:            median ${mp} ms"
echo "srun --horovod -N2 -n4 true:  median ${mh} ms"
awk -v a="$mh" -v b="$mp" 'BEGIN { printf "ratio: %.3f (target <= 1.15)\n", a / b }'
