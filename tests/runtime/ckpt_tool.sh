#!/bin/bash
# ckpt_tool.sh - hvd-ckpt list/verify/show/prune on real checkpoints, and
# the damage verify must report: flipped byte, truncated file, missing
# manifest, stale `latest`, a partial directory left by a crash.
. "$(dirname "$0")/ckpt_lib.sh"

plan 17
d=$W/ck
CKPT_PROG_SOLO=1 "$PROG" "$d" 50 10 --keep 5 >/dev/null 2>"$W/err"
ok $? "five checkpoints written (steps 10..50)"
out=$("$HVD_CKPT" list "$d")
ok $? "list"
like "$out" "^step-00000050 +50 +1 .* complete \(latest\)" "list: newest is complete and latest"
is "$(grep -c complete <<<"$out")" 5 "list: five complete"
out=$("$HVD_CKPT" verify "$d")
ok $? "verify: all good"
out=$("$HVD_CKPT" show "$d")
like "$out" "^step: +50" "show: the newest manifest"
like "$out" "per-rank +mine" "show: lists the buffers"

flip() { printf '\x5a' | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
flip "$d/step-00000050/replicated.bin" 100
truncate -s -8 "$d/step-00000040/rank-00000.bin"
rm "$d/step-00000030/MANIFEST"
printf 'step-00000020\n' >"$d/latest"
mkdir "$d/step-00000060.partial-1-2"
out=$("$HVD_CKPT" verify "$d")
is $? 1 "verify: exit status 1 when something is damaged"
like "$out" "step-00000050: BAD: .*step-00000050/replicated.bin: checksum" "flipped byte found, file named"
like "$out" "step-00000040: BAD: .*rank-00000.bin is 32760 bytes, the manifest says 32768" "truncated file found"
like "$out" "step-00000030: BAD: .*no MANIFEST" "missing manifest found"
like "$out" "latest: STALE: names step-00000020, newest complete is step-00000050" "stale latest found"
like "$out" "step-00000060.partial-1-2: partial" "partial directory reported"
out=$(CKPT_PROG_SOLO=1 "$PROG" "$d" 50 10 --keep 5 2>&1)
like "$out" "^restored 20 ok" "restore falls back past all three to step 20"
out=$("$HVD_CKPT" prune "$d" 1)
ok $? "prune to 1"
out=$("$HVD_CKPT" list "$d")
like "$out" "^step-00000050 .*complete \(latest\)" "the checkpoint written after the restore is kept"
is "$(grep -c '^step-' <<<"$out")" 1 "only it is left (damaged, old and partial ones removed)"
done_testing
