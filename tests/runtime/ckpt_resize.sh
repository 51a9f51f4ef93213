#!/bin/bash
# ckpt_resize.sh - resume on another number of ranks: a deterministic
# training loop (ckpt_resize.c) checkpoints on 4 ranks and stops, resumes
# on 3 and stops, resumes on 2 and finishes.  Every sample of each epoch
# is seen exactly once across the changes (counted from every rank's log),
# the replicated state is identical bit for bit on every rank and across
# each restore, the sharded state that N ranks saved is, reassembled, byte
# for byte what M ranks restored, and every value is the one the samples
# seen so far give.  Per-rank state on a size change is a clear error.
. "$(dirname "$0")/ckpt_lib.sh"

R=$top_builddir/tests/runtime/ckpt_resize
[ -x "$R" ] || skip_all "$R not built"
NP=$(ckpt_np)
[ "$NP" -ge 2 ] || skip_all "needs several ranks (libhvd collectives and a launcher)"
plan 27
D=$W/ck
O=$W/out
mkdir -p "$O"

# cat_ranks WHAT RUN N: the N ranks' dumps, concatenated in rank order
cat_ranks() {
	local r
	for ((r = 0; r < $3; r++)); do cat "$O/$1.$2.$r"; done
}
# same_all WHAT RUN N: every rank's dump identical
same_all() {
	[ "$(for ((r = 0; r < $3; r++)); do md5sum <"$O/$1.$2.$r"; done |
		sort -u | wc -l)" -eq 1 ]
}

out=$(run 4 "$R" "$D" "$O" 1 4 2>&1)
is "$?" 85 "4 ranks: 4 steps, checkpoint, stop (85)"
is "$(grep -c '^stopped at step 4: epoch 0 consumed 64' <<<"$out")" 4 \
	"every rank stopped at 64 samples of epoch 0"
"$HVD_CKPT" show "$D" >"$W/show" 2>&1
like "$(cat "$W/show")" "sharded +table .*\(37 elements of 16 bytes, split over 4 ranks\)" \
	"hvd-ckpt show: the sharded buffer, written by 4 ranks"
like "$(cat "$W/show")" "shard-00003.bin" "one shard file per writer"

out=$(run 3 "$R" "$D" "$O" 2 5 2>&1)
is "$?" 85 "3 ranks: restore, 5 steps, checkpoint, stop"
is "$(grep -c '^restored: epoch 0 consumed 64 rank . of 3 .*: ok$' <<<"$out")" 3 \
	"every rank of 3 restored the state of 64 samples (values checked)"
[ "$(cat_ranks save.tab 1 4 | wc -c)" -eq 592 ] &&
	cmp -s <(cat_ranks save.tab 1 4) <(cat_ranks restore.tab 2 3)
ok $? "sharded: the blocks 4 ranks saved, reassembled, are what 3 restored"
same_all save.w 1 4 && same_all restore.w 2 3 &&
	cmp -s "$O/save.w.1.0" "$O/restore.w.2.2"
ok $? "replicated: identical on the 4 writers and on the 3 restorers"
is "$(wc -c <"$O/save.tab.1.0") $(wc -c <"$O/restore.tab.2.0")" "160 208" \
	"rank 0 held 10 of the 37 elements of 4 ranks, holds 13 of 3"
is "$(grep -c '^stopped at step 9: epoch 1 consumed 12' <<<"$out")" 3 \
	"stopped in the next epoch (64 + 3 x 12 + 1, a short last step, + 12)"

out=$(run 2 "$R" "$D" "$O" 3 0 2>&1)
is "$?" 0 "2 ranks: restore and finish"
is "$(grep -c '^restored: epoch 1 consumed 12 rank . of 2 .*: ok$' <<<"$out")" 2 \
	"every rank of 2 restored the state of epoch 1, 12 samples"
[ "$(cat_ranks save.tab 2 3 | wc -c)" -eq 592 ] &&
	cmp -s <(cat_ranks save.tab 2 3) <(cat_ranks restore.tab 3 2)
ok $? "sharded: 3 ranks' blocks reassembled are what 2 restored"
same_all save.w 2 3 && same_all restore.w 3 2 &&
	cmp -s "$O/save.w.2.0" "$O/restore.w.3.1"
ok $? "replicated: identical on the 3 writers and the 2 restorers"
is "$(grep -c '^finished: epoch 2 consumed 0 rank . of 2 .*: ok$' <<<"$out")" 2 \
	"both ranks end with the values of 2 full epochs"

# every sample of each epoch, exactly once, over 4 -> 3 -> 2 ranks
cat "$O"/seen.* >"$W/seen"
is "$(wc -l <"$W/seen")" 202 "202 samples taken in all (2 epochs of 101)"
is "$(sort -u "$W/seen" | wc -l)" 202 "no sample taken twice"
is "$(awk '$1 < 2 && $2 < 101' "$W/seen" | sort -u | wc -l)" 202 \
	"every sample of both epochs taken"
is "$(cat "$O"/seen.1.* | wc -l) $(cat "$O"/seen.2.* | wc -l) $(cat "$O"/seen.3.* | wc -l)" \
	"64 49 89" "64 on 4 ranks, 49 on 3, 89 on 2"

# growing: written by 2 ranks (async), restored on 3
G=$W/grow
run 2 "$R" "$G" "$O" 4 6 --async >"$W/g1" 2>&1
is "$?" 85 "2 ranks, async: 6 steps, checkpoint, stop"
cp -a "$G" "$W/damaged"   # for the damaged-file case below
out=$(run 3 "$R" "$G" "$O" 5 0 2>&1)
is "$(grep -c '^restored: epoch 0 consumed 48 rank . of 3 .*: ok$' <<<"$out") \
$(grep -c '^finished: .*: ok$' <<<"$out")" "3 3" \
	"restored on 3 ranks (more than wrote it), finished with the right values"
[ "$(cat_ranks save.tab 4 2 | wc -c)" -eq 592 ] &&
	cmp -s <(cat_ranks save.tab 4 2) <(cat_ranks restore.tab 5 3)
ok $? "sharded: 2 ranks' blocks reassembled are what 3 restored"

# a damaged shard file of the newest checkpoint: found on another size
# too (the writers' files are verified, spread over the ranks), and the
# previous checkpoint (step 5, 40 samples) restores
printf 'X' | dd of="$W/damaged/step-00000006/shard-00001.bin" bs=1 seek=3 \
	conv=notrunc 2>/dev/null
out=$(HOROVOD_LOG_LEVEL=warning run 3 "$R" "$W/damaged" "$O" 6 1 2>&1)
is "$(grep -c '^restored: epoch 0 consumed 40 rank . of 3 .*: ok$' <<<"$out")" 3 \
	"a damaged writer's shard file: skipped on 3 ranks, step 5 restored"
like "$out" "shard-00001.bin: checksum [0-9a-f]+, the manifest says" \
	"the warning names the file"

# per-rank state cannot be divided: a clear error, and the same size works
P=$W/perrank
run 2 "$R" "$P" "$O" 6 3 --per-rank >"$W/p1" 2>&1
is "$?" 85 "2 ranks with a per-rank buffer: checkpoint, stop"
out=$(run 3 "$R" "$P" "$O" 7 0 --per-rank 2>&1)
is "$?" 3 "restoring it on 3 ranks fails"
like "$out" "HVD_ERR_MISMATCH: .*written by 2 ranks, this run has 3: its per-rank buffer \"rng\" is each rank's own and cannot be divided among 3 ranks \(restore on 2 ranks, or make it HVD_CKPT_REPLICATED .* or hvd_ckpt_register_sharded\(\)" \
	"naming the buffer and the sizes, saying what to use instead"
done_testing
