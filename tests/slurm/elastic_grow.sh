#!/bin/bash
# Growing in place (issue 14): in one allocation of N nodes (3 when the
# cluster has them), srun --horovod=elastic trains on N-1; a second srun
# --horovod=elastic step on the last node joins it through the rendezvous
# file.  The running tasks see it at a commit (HVD_HOSTS_UPDATED), the
# world re-forms at N, the newcomer's state after the sync is the
# survivors' bit for bit (a hash of weights, sampler position and sample
# counts, printed by every rank), and all finish with every sample of every
# epoch seen once.  The rendezvous directory is 0700 and its file 0600;
# a file another user could have written is refused and the newcomer
# starts alone, saying why.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/slurm/elastic_lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
[[ -x $EL_PROG ]] || skip_all "$EL_PROG is not built"
nodes=$(run_timeout 30 sinfo -h -o %D | awk '{ s += $1 } END { print s + 0 }')
n=$((nodes >= 3 ? 3 : nodes))
((n >= 2)) || skip_all "needs 2 nodes, the cluster has $nodes"
plan 12
wd=$(slurm_workdir)
cd "$wd" || bail_out "no $wd"

# The job: step a on the first n-1 nodes, step b on the last one once a
# has trained a while.  ELASTIC_B_ENV: variables for step b only.
cat >"$wd/grow.sh" <<'JOB'
#!/bin/bash
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
last=${nodes[-1]}
first=$(IFS=,; echo "${nodes[*]:0:${#nodes[@]}-1}")
k=$((${#nodes[@]} - 1))
E=(--no-kill --kill-on-bad-exit=0 --horovod=elastic)
export ELASTIC_STEP_MS=20
srun -N$k -n$k -w "$first" "${E[@]}" "$PROG" 4 >a.out 2>a.err &
a=$!
for ((i = 0; i < 3000; i++)); do
	grep -q "^step 30 " a.out 2>/dev/null && break
	sleep 0.02
done
env $ELASTIC_B_ENV srun -N1 -n1 -w "$last" "${E[@]}" "$PROG" 4 >b.out 2>b.err
echo "b $?" >rc
wait $a
echo "a $?" >>rc
JOB
chmod +x "$wd/grow.sh"
out=$(PROG=$EL_PROG run_timeout "$HVD_TEST_TIMEOUT" salloc -Q -N"$n" --no-kill \
	"$wd/grow.sh" 2>&1)
is "$(tr '\n' ' ' <"$wd/rc" 2>/dev/null)" "b 0 a 0 " \
	"$((n - 1)) tasks train, a step of 1 task joins them: both steps exit 0" ||
	diag "$out"$'\n'"$(tail -20 "$wd/b.err" 2>/dev/null)"
is "$(awk '$1 == "start" { print $3, $5, $9 }' "$wd/b.out")" "$((n - 1)) $n 1" \
	"the newcomer's hvd_init returns it as rank $((n - 1)) of $n, epoch 1"
is "$(awk '$1 == "reset" { print $7 }' "$wd/a.out" | sort -u)" "$n" \
	"the running tasks re-formed once, at size $n"
hashes=$(cat "$wd/a.out" "$wd/b.out" | awk '$1 == "sync" && $3 == 1 { print $9 }' | sort -u)
is "$(wc -l <<<"$hashes")" 1 "at the join every rank holds the same state (one hash: $hashes)"
is "$(cat "$wd/a.out" "$wd/b.out" | grep -c '^sync epoch 1 ')" "$n" \
	"... all $n ranks, the newcomer among them"
old=$(awk '$1 == "sync" && $3 == 0 { print $9 }' "$wd/a.out" | sort -u)
[[ -n $old && $old != "$hashes" ]]
ok $? "... which is the trained state, not the initial one"
is "$(awk '$1 == "done" { print $3 }' "$wd/a.out")" "$n" "training finished at size $n"
awk '$1 == "epoch" && $3 == "seen-once" { e++; if ($4 != $6) bad++ }
     END { exit !(e == 4 && !bad) }' "$wd/a.out"
ok $? "every sample of each of the 4 epochs seen exactly once across the growth"
st=$(stat -c %a "$wd/.hvd-elastic" 2>/dev/null)
is "$st" 700 "the rendezvous directory is 0700"
is "$(find "$wd/.hvd-elastic" -type f 2>/dev/null | wc -l)" 0 "... and rank 0's finalize removed its file"

# A rendezvous file others could write is not trusted: with a directory
# open to others the newcomer says why, and trains alone.
mkdir -p "$wd/open"
chmod 777 "$wd/open"
out=$(cd "$wd" && HOROVOD_ELASTIC_DIR=$wd/open HOROVOD_LOG_LEVEL=warning \
	ELASTIC_STEP_MS=0 run_timeout "$HVD_TEST_TIMEOUT" srun -Q -N1 -n1 \
	--no-kill --kill-on-bad-exit=0 --horovod=elastic "$EL_PROG" 1 2>&1)
like "$out" "is not private to this user .*mode 0777" \
	"a rendezvous directory open to others: refused, with the reason"
like "$out" "done size 1 " "... and the step trains on its own"
exit 0
