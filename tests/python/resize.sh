#!/bin/bash
# hvd.torch.Checkpoint resumed on another number of ranks: a torch
# training loop (resize_prog.py: rng=False, hvd.GlobalSampler) runs 4
# ranks and stops, resumes on 3 and stops, resumes on 2 and finishes.
# Every sample of each epoch is trained on exactly once across the changes
# (counted from every rank's log), the replicated weights are identical on
# every rank and across each restore; with per-rank RNG state (rng=True) a
# restore on another size is a clear error.
. "$(dirname "$0")/lib.sh"
py_require
[ -x "$HVDRUN" ] || skip_all "hvdrun not built ($HVDRUN)"
plan 12
PROG=$top_srcdir/tests/python/resize_prog.py
D=$OUT/ck
go() { # np run stop [--rng-dir RDIR]
	np=$1
	shift
	timeout -k 10 "$PY_LIMIT" "$HVDRUN" -np "$np" "$HVD_PYTHON" "$PROG" \
		"$D" "$OUT" "$@"
}
# sums NAME LOG: the distinct checksums of the lines starting with NAME
sums() { sed -n "s/^$1.* checksum //p" "$2" | sort -u; }

go 4 1 5 >"$OUT/l1" 2>&1
is "$?" 85 "4 ranks: 5 steps, checkpoint, stop"
is "$(grep -c '^stopped at step 5: epoch 0 consumed 80' "$OUT/l1")" 4 \
	"every rank stopped at 80 samples"
# (with a checkpoint of per-rank RNG state written by 3 ranks on the side)
go 3 2 3 --rng-dir "$OUT/rng" >"$OUT/l2" 2>&1
is "$?" 85 "3 ranks: restore, 3 steps (across the epoch's end), stop"
is "$(grep -c '^restored step 5: epoch 0 consumed 80' "$OUT/l2")" 3 \
	"every rank of 3 restored the position of 80 samples"
is "$(sums restored "$OUT/l2" | wc -l) $(sums restored "$OUT/l2")" \
	"1 $(sums stopped "$OUT/l1")" \
	"weights: one value on the 4 writers and on the 3 restorers"
[ "$(sums restored "$OUT/l2")" = "$(sums stopped "$OUT/l1")" ] ||
	diag_file "$OUT/l2" 20
is "$(grep -c '^stopped at step 8: epoch 1 consumed 12' "$OUT/l2")" 3 \
	"stopped in epoch 1 (80 + 12 + 9, a short step, then 12)"
go 2 3 0 --rng-dir "$OUT/rng" >"$OUT/l3" 2>&1
is "$?" 0 "2 ranks: restore and finish"
like "$(cat "$OUT/l3")" "rng restore failed: .*per-rank buffer \"rank/state\".*; hvd.Checkpoint: the per-rank state \(RNG\) was saved by another number of ranks; to resume on any number, make the Checkpoint with rng=False and keep the sampler position global \(hvd.torch.GlobalSampler\)" \
	"per-rank RNG state written by 3 ranks, on 2: refused, saying to use rng=False and GlobalSampler"
is "$(sums restored "$OUT/l3")" "$(sums stopped "$OUT/l2")" \
	"weights: the 3 writers' value restored on 2"
is "$(sums finished "$OUT/l3" | wc -l)" 1 "both ranks end with the same weights"
cat "$OUT"/seen.* >"$OUT/seen"
is "$(wc -l <"$OUT/seen") $(sort -u "$OUT/seen" | wc -l)" "202 202" \
	"202 samples trained on (2 epochs of 101), none twice"
is "$(awk '$1 < 2 && $2 < 101' "$OUT/seen" | sort -u | wc -l)" 202 \
	"every sample of both epochs, once"

done_testing
