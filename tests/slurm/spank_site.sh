#!/bin/bash
# shellcheck disable=SC2154 # lib.sh sets oc_dir, oc_out, oc_plugin, top_builddir
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# A site's policy and a node's limits, on a one-node cluster of its own:
# its daemons run on CPU 1 only (taskset), so every task is allowed CPU 1
# and nothing else, and its plugstack.conf sets ckpt_roots.
#   - cpu-bind=numa binds within the task's mask: HOROVOD_CPU_LIST and the
#     task's Cpus_allowed_list are "1", not the node's NUMA CPUs (0-1);
#   - ckpt_roots holds for --horovod=ckpt-dir (refused in srun already) and
#     for a HOROVOD_CHECKPOINT_DIR the user exported (refused in
#     slurmstepd, before the program starts), absolute or relative to the
#     job's working directory;
#   - KillOnBadExit=1 in slurm.conf refuses --horovod=elastic unless srun
#     says --kill-on-bad-exit=0.
hvdt_own_cluster=1
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

own_cluster_require --plugin
command -v taskset >/dev/null || skip_all "no taskset (util-linux)"
grep -qE '^Cpus_allowed_list:[[:space:]]*0-[1-9]' /proc/self/status ||
	skip_all "needs CPUs 0 and 1 (this process may use $(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status))"
own_cluster_visible
plan 14
T=$HVD_TEST_TIMEOUT

own_cluster_dir site
dir=$oc_dir
roots=$dir/scratch
mkdir -p "$roots" "$dir/home"
chmod 755 "$roots" "$dir/home"
own_cluster_start taskset -c 1 -- --nodes 1 --plugin "$oc_plugin" \
	--plugstack-args "ckpt_roots=$roots"
ok $? "a 1-node cluster on CPU 1, with ckpt_roots=$roots" || {
	diag "$oc_out"
	exit 0
}
show='echo "$(awk "/^Cpus_allowed_list:/ { print \$2 }" /proc/self/status) ${HOROVOD_CPU_LIST-unset}"'

# --- binding inside the task's mask
is "$(run_timeout "$T" srun -Q -n1 bash -c "$show" 2>&1)" "1 unset" \
	"without --horovod a task may use CPU 1 only"
is "$(run_timeout "$T" srun -Q --horovod -n1 bash -c "$show" 2>&1)" "1 1" \
	"cpu-bind=numa: HOROVOD_CPU_LIST=1 and the task on CPU 1, not on the NUMA node's 0-1"
like "$("$top_builddir/spank/hvd-topo" --local-size 1 | grep '^  HOROVOD_CPU_LIST=')" \
	'=0-1$' "(hvd-topo, which knows no task mask, says 0-1 for the node)"

# --- ckpt_roots: the option
out=$(run_timeout "$T" srun -Q -J site-$$ --horovod=ckpt-dir="$dir/home/%u" -n1 true 2>&1)
st=$?
ok $((st == 0)) "ckpt-dir outside ckpt_roots: srun fails (status $st)"
like "$out" "outside the directories this site allows for checkpoints; expected a ckpt-dir under $roots" \
	"... saying where checkpoints may go" || diag "$out"
out=$(run_timeout "$T" srun -Q --horovod=ckpt-dir="$roots/%u/%j" -n1 \
	bash -c 'echo "dir $HOROVOD_CHECKPOINT_DIR"' 2>&1)
like "$out" "^dir $roots/root/[0-9]+$" "ckpt-dir inside ckpt_roots: the task runs" || diag "$out"

# --- ckpt_roots: a directory the user exported
out=$(HOROVOD_CHECKPOINT_DIR=$dir/home/ck run_timeout "$T" srun -Q --horovod -n1 \
	bash -c 'echo ran' 2>&1)
is "$(grep -c '^ran' <<<"$out")" 0 "exported HOROVOD_CHECKPOINT_DIR outside ckpt_roots: the task never ran" ||
	diag "$out"
like "$out" "horovod: HOROVOD_CHECKPOINT_DIR=$dir/home/ck \(exported before srun\) is outside the directories the admin allows for checkpoints \($roots\)" \
	"... and slurmstepd says why" || diag "$out"
out=$(HOROVOD_CHECKPOINT_DIR=$roots/mine run_timeout "$T" srun -Q --horovod -n1 \
	bash -c 'echo "ran $HOROVOD_CHECKPOINT_DIR"' 2>&1)
is "$out" "ran $roots/mine" "exported HOROVOD_CHECKPOINT_DIR inside: kept, the task runs"
out=$(HOROVOD_CHECKPOINT_DIR=ck run_timeout "$T" srun -Q --horovod -n1 \
	--chdir="$roots" bash -c 'echo "ran $HOROVOD_CHECKPOINT_DIR"' 2>&1)
is "$out" "ran ck" "a relative export from a working directory inside ckpt_roots runs"
out=$(HOROVOD_CHECKPOINT_DIR=ck run_timeout "$T" srun -Q --horovod -n1 \
	--chdir="$dir/home" bash -c 'echo ran' 2>&1)
like "$out" "HOROVOD_CHECKPOINT_DIR=ck, that is $dir/home/ck \(exported before srun\) is outside" \
	"... from one outside it is refused, naming the full path" || diag "$out"

# --- the site ends steps on a task's error: elastic must opt out.  srun
# reads slurm.conf itself at start, so the line needs no reconfigure.
echo "KillOnBadExit=1" >>"$dir/slurm.conf"
out=$(run_timeout "$T" srun -Q -k --horovod=elastic -n1 bash -c 'echo ran' 2>&1)
like "$out" 'KillOnBadExit=1 in slurm.conf.*give srun --kill-on-bad-exit=0' \
	"KillOnBadExit=1: srun -k --horovod=elastic refused, saying what to give" ||
	diag "$out"
out=$(run_timeout "$T" srun -Q -k --kill-on-bad-exit=0 --horovod=elastic -n1 \
	bash -c 'echo "ran $HOROVOD_ELASTIC"' 2>&1)
is "$out" "ran 1" "... and with --kill-on-bad-exit=0 the step runs"
exit 0
