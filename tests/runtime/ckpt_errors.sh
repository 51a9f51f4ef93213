#!/bin/bash
# ckpt_errors.sh - a full file system (a small tmpfs mounted for the test)
# and a directory the user may not write give a clear error naming the
# path, and leave the previous checkpoint intact and restorable.
# Needs root for mount (skips with the reason otherwise); the permission
# case runs the program as `nobody`, since root bypasses permissions.
. "$(dirname "$0")/ckpt_lib.sh"

NP=$(ckpt_np)
plan 12
chmod 755 "$W"

# --- full file system
mnt=$W/full
mkdir -p "$mnt"
BYTES=$((512 << 10))            # half replicated, half per rank
per_ckpt=$((BYTES / 2 + NP * BYTES / 2))
size_k=$(((per_ckpt * 3 / 2) >> 10))
if mount -t tmpfs -o size=${size_k}k hvd-ckpt-test "$mnt" 2>"$W/mount.err"; then
	trap 'umount "$mnt" 2>/dev/null; rm -rf "$W"' EXIT
	run "$NP" "$PROG" "$mnt/ck" 5 5 --bytes $BYTES >"$W/o1" 2>"$W/e1"
	ok $? "first checkpoint fits in a ${size_k} KiB tmpfs"
	run "$NP" "$PROG" "$mnt/ck" 10 5 --bytes $BYTES --expect-error \
		>"$W/o2" 2>"$W/e2"
	is $? 3 "second checkpoint fails (no room for two)"
	like "$(cat "$W/e2")" "$mnt/ck/step-00000010.partial-[^ ]*: No space left on device: the file system .* is full" \
		"error names the file and says the file system is full"
	"$HVD_CKPT" verify "$mnt/ck" >"$W/v" 2>&1
	ok $? "previous checkpoint intact (hvd-ckpt verify), no partial left"
	[ $? -ne 0 ] && diag_file "$W/v"
	out=$(run "$NP" "$PROG" "$mnt/ck" 5 5 --bytes $BYTES 2>&1)
	like "$out" "^restored 5 ok" "and it restores"
	run "$NP" "$PROG" "$mnt/ck" 10 5 --bytes $BYTES --async \
		--expect-error >"$W/o5" 2>"$W/e5"
	is $? 3 "async: the failed background write is reported"
	"$HVD_CKPT" verify "$mnt/ck" >"$W/v5" 2>&1
	ok $? "async: previous checkpoint intact" || diag_file "$W/v5"
	umount "$mnt"
else
	for i in 1 2 3 4 5 6 7; do
		echo "ok $((tap_n += 1)) # SKIP cannot mount a tmpfs: $(head -1 "$W/mount.err")"
	done
fi

# --- permission denied: nobody's own directory, made read-only (another
# user's directory is refused before permissions matter: ckpt_trust.sh)
ck=$W/perm
mkdir -m 700 "$ck"
if can_switch_users; then
	chown $NOBODY "$ck"
	as_user $NOBODY "$PROG" "$ck" 5 5 >"$W/o3" 2>"$W/e3"
	ok $? "a checkpoint written by its owner (nobody)"
	chmod 555 "$ck"
	as_user $NOBODY "$PROG" "$ck" 10 5 >"$W/o4" 2>"$W/e4"
	is $? 1 "the directory made read-only: the owner cannot checkpoint into it"
	like "$(cat "$W/e4")" "cannot write in $ck: Permission denied: no permission" \
		"error names the directory and says it is a permission problem"
	"$HVD_CKPT" verify "$ck" >"$W/v2" 2>&1
	ok $? "previous checkpoint intact"
	chmod 700 "$ck"
	out=$(as_user $NOBODY "$PROG" "$ck" 5 5 2>&1)
	like "$out" "^restored 5 ok" "and it restores"
else
	for i in 1 2 3 4 5; do
		echo "ok $((tap_n += 1)) # SKIP cannot run as nobody (needs root and setpriv)"
	done
fi
done_testing
