#!/bin/bash
# ckpt_resize.sh - resume on another number of nodes, as a requeued job
# with `sbatch -N MIN-MAX` does: tests/runtime/ckpt_resize (a deterministic
# training loop with replicated, sharded and global-sampler state) runs as
# a batch job of 4 tasks on 2 nodes and stops after a checkpoint; a job
# `sbatch -N 1-2 -n 3` resumes on 3 ranks and stops; with a node drained,
# `sbatch -N 1-2 --ntasks-per-node=2` gets 1 node and finishes on 2 ranks.
# The drained node is excluded from that job too: under make -j2 a slurm
# test that starts meanwhile finds the cluster "unhealthy" and resumes
# drained nodes (lib.sh's repair), and once (stop 36's CI dry run) it did
# so 0.8 s after the drain, before the job was scheduled: 2 nodes.
# Every sample of each epoch is seen exactly once (counted), the replicated
# state is identical on every rank and across each restore, the sharded
# blocks N ranks saved are, reassembled, what M ranks restored.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

R=$top_builddir/tests/runtime/ckpt_resize
[[ -x $R ]] || skip_all "$R not built"
[[ $(run_timeout 30 sinfo -h -N -o %N 2>/dev/null | sort -u | wc -l) -ge 2 ]] ||
	skip_all "needs 2 nodes"
plan 13
wd=$(slurm_workdir)
cd "$wd" || bail_out "cannot cd to $wd"
D=$wd/ck
O=$wd/out
mkdir -p "$O"
drained=
cleanup() {
	[[ -n $drained ]] && run_timeout 30 scontrol update NodeName="$drained" \
		State=RESUME >/dev/null 2>&1
	hvdt_at_exit
}
trap cleanup EXIT

script=$wd/resize.sbatch
cat >"$script" <<'EOS'
#!/bin/bash
srun --mpi=pmix "$R" "$D" "$O" "$RUN" "$STOP"
echo "srun exit $? on $SLURM_JOB_NUM_NODES nodes, $SLURM_NTASKS tasks"
EOS
# job RUN STOP SBATCH-OPTIONS...: submit, wait, print its output
job() {
	local run=$1 stop=$2 id
	shift 2
	id=$(R=$R D=$D O=$O RUN=$run STOP=$stop run_timeout 30 sbatch \
		--parsable --export=ALL -o "$wd/job$run.out" "$@" "$script") ||
		return 1
	wait_job "$id" >/dev/null
	cat "$wd/job$run.out"
}
cat_ranks() { # WHAT RUN N
	local r
	for ((r = 0; r < $3; r++)); do cat "$O/$1.$2.$r"; done
}
same_all() { # WHAT RUN N: every rank's dump identical
	[[ $(for ((r = 0; r < $3; r++)); do md5sum <"$O/$1.$2.$r"; done |
		sort -u | wc -l) -eq 1 ]]
}

out=$(job 1 4 -N 2 -n 4)
like "$out" "srun exit 85 on 2 nodes, 4 tasks" "job 1: 4 ranks on 2 nodes, checkpoint, stop (85)"
is "$(grep -c '^stopped at step 4: epoch 0 consumed 64' <<<"$out")" 4 \
	"every rank stopped at 64 samples"

out=$(job 2 5 -N 1-2 -n 3)
like "$out" "srun exit 85 on 2 nodes, 3 tasks" "job 2, sbatch -N 1-2 -n 3: resumed on 3 ranks, stopped"
is "$(grep -c '^restored: epoch 0 consumed 64 rank . of 3 .*: ok$' <<<"$out")" 3 \
	"every rank of 3 restored the state of 64 samples (values checked)"
[[ $(cat_ranks save.tab 1 4 | wc -c) -eq 592 ]] &&
	cmp -s <(cat_ranks save.tab 1 4) <(cat_ranks restore.tab 2 3)
ok $? "sharded: the blocks 4 ranks saved, reassembled, are what 3 restored"
same_all save.w 1 4 && same_all restore.w 2 3 &&
	cmp -s "$O/save.w.1.0" "$O/restore.w.2.0"
ok $? "replicated: identical on the 4 writers and the 3 restorers"

drained=$(run_timeout 30 sinfo -h -N -o %N | sort -u | tail -1)
run_timeout 30 scontrol update NodeName="$drained" State=DRAIN \
	Reason="ckpt_resize test" >/dev/null 2>&1
ok $? "$drained drained"
out=$(job 3 0 -N 1-2 --ntasks-per-node=2 --exclude="$drained")
like "$out" "srun exit 0 on 1 nodes, 2 tasks" "job 3, sbatch -N 1-2 --ntasks-per-node=2 with a node drained: 1 node, 2 ranks, finished"
is "$(grep -c '^restored: epoch 1 consumed 12 rank . of 2 .*: ok$' <<<"$out") $(grep -c '^finished: epoch 2 consumed 0 .*: ok$' <<<"$out")" \
	"2 2" "both restored the state of epoch 1, 12 samples, and finished with the right values"
[[ $(cat_ranks save.tab 2 3 | wc -c) -eq 592 ]] &&
	cmp -s <(cat_ranks save.tab 2 3) <(cat_ranks restore.tab 3 2) &&
	same_all save.w 2 3 && same_all restore.w 3 2 &&
	cmp -s "$O/save.w.2.0" "$O/restore.w.3.0"
ok $? "sharded and replicated state of the 3 writers is what the 2 restored"

cat "$O"/seen.* >"$wd/seen"
is "$(wc -l <"$wd/seen") $(sort -u "$wd/seen" | wc -l)" "202 202" \
	"202 samples taken over the three jobs, none twice"
is "$(awk '$1 < 2 && $2 < 101' "$wd/seen" | sort -u | wc -l)" 202 \
	"every sample of both epochs, once"
is "$(cat "$O"/seen.1.* | wc -l) $(cat "$O"/seen.2.* | wc -l) $(cat "$O"/seen.3.* | wc -l)" \
	"64 49 89" "64 on 4 ranks, 49 on 3, 89 on 2"
