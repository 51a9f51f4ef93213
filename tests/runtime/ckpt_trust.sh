#!/bin/bash
# ckpt_trust.sh - the checkpoint directory and the directories above it are
# not trusted as found.  $W/tmp plays /var/tmp (root, 1777); the neighbour
# is `nobody`, a second user is uid 65533:
#  1. a directory the neighbour created first, where a job of root's will
#     checkpoint (mode 0777): refused, the message says whose it is;
#  2. a checkpoint directory of one's own that others can write: refused;
#  3. a parent others can write, not sticky: refused; root's and sticky
#     ones (and a link root owns) are fine;
#  4. a link planted by the neighbour on the way: not followed;
#  5. the shared parent of a per-user layout (tmp/shared/%u/job): a user's
#     job does not create it (it would lock every other user out of the
#     path), root's does, mode 1777, and then every user's job runs.
. "$(dirname "$0")/ckpt_lib.sh"

can_switch_users || skip_all "cannot run commands as nobody (needs root and setpriv)"
plan 21
chmod 755 "$W"
T=$W/tmp
mkdir -m 1777 "$T"

prog() { "$PROG" "$1" 5 5 2>&1; }          # as root
prog_as() { local u=$1; shift; as_user "$u" "$PROG" "$1" 5 5 2>&1; }

# --- 1. squatted
as_user $NOBODY mkdir -m 777 "$T/ckpt-root"
out=$(CKPT_PROG_SOLO=1 prog "$T/ckpt-root")
is $? 1 "a directory nobody created first (0777): root's job refuses it"
like "$out" "$T/ckpt-root belongs to uid 65534, not to you \(uid 0\)" \
	"the message says whose it is"
like "$out" "use a directory of your own" "and what to do"
is "$(find "$T/ckpt-root" -mindepth 1 | wc -l)" 0 "nothing was written into it"

# --- 2. one's own, writable by others
mkdir -m 777 "$W/open"
out=$(CKPT_PROG_SOLO=1 prog "$W/open")
is $? 1 "one's own checkpoint directory, mode 0777: refused"
like "$out" "$W/open is writable by group or others \(mode 0777\).*chmod go-w $W/open" \
	"the message gives the mode and the fix"
mkdir -m 770 "$W/group"
out=$(CKPT_PROG_SOLO=1 prog "$W/group")
is $? 1 "mode 0770 (group-writable): refused too"

# --- 3. parents
mkdir -m 777 "$W/lax"
out=$(CKPT_PROG_SOLO=1 prog "$W/lax/ck")
is $? 1 "a parent writable by others and not sticky: refused"
like "$out" "$W/lax, above the checkpoint directory, is writable by group or others \(mode 0777\) and not a sticky directory of root's" \
	"the message names the parent"
out=$(CKPT_PROG_SOLO=1 prog "$T/mine")
like "$out" "^restored 0 ok" "below a root-owned sticky directory (as /var/tmp): fine"
ok "$( [ "$(stat -c %a "$T/mine")" = 700 ]; echo $?)" "and the directory it created is 0700"
mkdir -p "$W/real"
ln -s "$W/real" "$W/rootlink"
out=$(CKPT_PROG_SOLO=1 prog "$W/rootlink/ck")
like "$out" "^restored 0 ok" "a link root owns, on the way: followed"

# --- 4. a link the neighbour planted
as_user $NOBODY mkdir -m 777 "$T/nobodys"
as_user $NOBODY ln -s "$T/nobodys" "$T/ckpt-link"
out=$(CKPT_PROG_SOLO=1 prog "$T/ckpt-link/ck")
is $? 1 "a link nobody planted on the way: not followed"
like "$out" "$T/ckpt-link is a symbolic link owned by uid 65534: not followed" \
	"the message says so"
is "$(find "$T/nobodys" -mindepth 1 | wc -l)" 0 "nothing was written where it points"

# --- 5. the shared parent of a per-user layout
out=$(prog_as $NOBODY "$T/shared/65534/job")
is $? 1 "a user's job does not create the shared parent tmp/shared"
like "$out" "will not create $T/shared: .*ask your admin to create it \(owner root, mode 1777" \
	"and says who should"
ok "$( [ ! -e "$T/shared" ]; echo $?)" "so nothing is left that locks the next user out"
out=$(CKPT_PROG_SOLO=1 prog "$T/shared/0/job")
like "$out" "^restored 0 ok" "root's job creates it"
is "$(stat -c '%a %u' "$T/shared")" "1777 0" "root-owned, mode 1777 (as /tmp)"
o1=$(prog_as $NOBODY "$T/shared/65534/job")
o2=$(prog_as $OTHER "$T/shared/65533/job")
ok "$( [[ $o1 =~ ^restored\ 0\ ok && $o2 =~ ^restored\ 0\ ok ]]; echo $?)" \
	"then two users' jobs both run below it (their own directories, 0700)"
[ $tap_fail -eq 0 ] || diag "$o1" "$o2"
done_testing
