#!/bin/bash
# ckpt_links.sh - the checkpointer never follows a symbolic link it finds
# in a checkpoint directory, and what it creates is private:
#  1. a link named like a partial (or an old checkpoint) pointing at another
#     directory: retention (a training run's, `hvd-ckpt prune` by root)
#     skips it and deletes nothing in the directory it points at;
#  2. files are created 0600 and directories 0700, whatever the umask;
#  3. a checkpoint directory, or a file in one, replaced by a link is not
#     read through it: verify reports it, restore falls back.
# The links are planted by `nobody`, and the run that would follow them is
# nobody's own (case 1a) or root's (case 1b, the admin's prune).
. "$(dirname "$0")/ckpt_lib.sh"

TRAIN=$top_builddir/contrib/examples/train
[ -x "$TRAIN" ] || skip_all "$TRAIN not built"
can_switch_users || skip_all "cannot run commands as nobody (needs root and setpriv)"
plan 14
chmod 755 "$W"

# files_in DIR: how many entries DIR holds
files_in() { find "$1" -mindepth 1 -maxdepth 1 | wc -l; }
precious() { # DIR OWNER: a directory of three files that must survive
	mkdir -p "$1"
	for f in a b c; do echo "$f" >"$1/$f"; done
	chown -R "$2" "$1"
}

# --- 1a. the reproduced case: a training run of nobody's, links in its
# directory (an earlier tool or a neighbour who could write there)
nb=$W/nb
mkdir "$nb"
chown $NOBODY "$nb"
chmod 700 "$nb"
precious "$nb/precious" $NOBODY
as_user $NOBODY mkdir -m 700 "$nb/ck"
as_user $NOBODY ln -s "$nb/precious" "$nb/ck/step-00000000.partial-x"
as_user $NOBODY ln -s "$nb/precious" "$nb/ck/step-00000001"
as_user $NOBODY "$TRAIN" --steps 30 --ckpt-every 10 --ckpt-dir "$nb/ck" \
	>"$W/train.out" 2>&1
ok $? "nobody: 30 steps, a checkpoint every 10, links in the directory"
is "$(files_in "$nb/precious")" 3 "retention deleted nothing the links point at"
ok "$( [ -L "$nb/ck/step-00000000.partial-x" ] && [ -L "$nb/ck/step-00000001" ]; echo $?)" \
	"the links are left alone (not ours: skipped, not removed)"
is "$("$HVD_CKPT" list "$nb/ck" | grep -c complete)" 3 "the three checkpoints are there"

# --- 1b. root's hvd-ckpt prune of a user's directory with links in it
precious "$W/rootfiles" 0
as_user $NOBODY ln -s "$W/rootfiles" "$nb/ck/step-00000002.partial-y"
as_user $NOBODY ln -s "$W/rootfiles" "$nb/ck/step-00000003"
"$HVD_CKPT" prune "$nb/ck" 1 >"$W/prune.out" 2>&1
ok $? "root: hvd-ckpt prune of nobody's directory"
is "$(files_in "$W/rootfiles")" 3 "root's files the links point at are intact"
out=$("$HVD_CKPT" list "$nb/ck")
like "$out" "^step-00000030 .*complete \(latest\)" "the newest checkpoint is kept"
is "$(grep -c complete <<<"$out")" 1 "the older ones are pruned"

# --- 2. modes, whatever the umask
(umask 000 && CKPT_PROG_SOLO=1 "$PROG" "$W/modes/ck" 10 5 >/dev/null 2>&1)
ok $? "a run with umask 000"
bad=$(find "$W/modes/ck" \( -type d ! -perm 700 \) -o \( -type f ! -perm 600 \) |
	while read -r p; do stat -c '%a %n' "$p"; done)
is "$bad" "" "every directory it created is 0700, every file 0600"

# --- 3. links in place of a checkpoint or of a file in one
d=$W/read/ck
CKPT_PROG_SOLO=1 "$PROG" "$d" 30 10 --keep 5 >/dev/null 2>&1
cp -a "$d/step-00000030" "$W/read/copy30"
rm -rf "$d/step-00000030"
ln -s "$W/read/copy30" "$d/step-00000030"
cp "$d/step-00000020/replicated.bin" "$W/read/repl20"
rm "$d/step-00000020/replicated.bin"
ln -s "$W/read/repl20" "$d/step-00000020/replicated.bin"
out=$("$HVD_CKPT" verify "$d" 2>&1)
like "$out" "step-00000020: BAD: .*replicated.bin: a symbolic link" \
	"verify: a data file that is a link is reported, not read"
unlike_30=$(grep -c '^step-00000030: ok' <<<"$out")
is "$unlike_30" 0 "verify: a checkpoint directory that is a link is not read through it"
out=$(CKPT_PROG_SOLO=1 "$PROG" "$d" 10 10 --keep 5 2>&1)
like "$out" "^restored 10 ok" "restore follows neither: it falls back to step 10"
is "$(files_in "$W/read/copy30")" 3 "and leaves what the links point at alone"
done_testing
