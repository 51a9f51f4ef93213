#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# The checkpoint directory slurmstepd creates for --horovod=ckpt-dir, on a
# node shared with a hostile user: nobody prepares a shared sticky directory
# (like /var/tmp) before user daemon's job asks for its checkpoint directory
# there.  A parent made by nobody and open to all, a checkpoint directory
# made for the victim beforehand, a planted symbolic link: each fails the
# step before the program starts, with a message saying what to do, and
# nothing of the victim's is created there.  The ordinary case creates the
# directory 0700, owned by the job's user.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
[[ $(id -u) == 0 ]] || skip_all "needs root to act as users nobody and daemon"
command -v runuser >/dev/null || skip_all "no runuser (util-linux)"
if ! id nobody >/dev/null 2>&1 || ! id daemon >/dev/null 2>&1; then
	skip_all "needs users nobody and daemon"
fi
plan 13
wd=$(slurm_workdir)
T=$HVD_TEST_TIMEOUT

base=$(mktemp -d /var/tmp/hvd-ckpt-attack.XXXXXX)
chmod 755 "$base"
shared=$base/shared
mkdir -m 1777 "$shared"
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	rm -rf "$base"
	hvdt_at_exit
}
trap cleanup EXIT

as() { # user command...
	local u=$1
	shift
	(cd "$wd" && run_timeout "$T" runuser -u "$u" -- "$@")
}

# victim OPTS: daemon's step with --horovod=OPTS; prints its output.
victim() {
	as daemon env SLURM_CONF="$SLURM_CONF" srun -Q --horovod="$1" -N1 -n1 \
		bash -c 'echo "ran $HOROVOD_CHECKPOINT_DIR"' 2>&1
}

# --- 1. the documented /var/tmp/hvd-ckpt/%u, made first by someone else
as nobody mkdir -m 0777 "$shared/hvd-ckpt"
out=$(victim "ckpt-dir=$shared/hvd-ckpt/%u/%j,ckpt-every=5")
is "$(grep -c '^ran' <<<"$out")" 0 "nobody's world-writable hvd-ckpt: the task never ran" ||
	diag "$out"
like "$out" "horovod: ckpt-dir: $shared/hvd-ckpt belongs to user nobody .*choose a directory" \
	"... the message names the directory, its owner and what to do"
is "$(ls -A "$shared/hvd-ckpt")" "" "... nothing of daemon's in it"

# --- 2. the victim's checkpoint directory, made beforehand by nobody
as nobody mkdir -m 0777 "$shared/daemon-ckpt"
out=$(victim "ckpt-dir=$shared/%u-ckpt")
is "$(grep -c '^ran' <<<"$out")" 0 "a checkpoint directory made by nobody: the task never ran" ||
	diag "$out"
like "$out" "daemon-ckpt already exists and belongs to user nobody .*not to you" \
	"... the message says it is not the user's"

# --- 3. a symbolic link planted on the path, into nobody's open directory
as nobody mkdir -m 0777 "$shared/nobodys"
as nobody ln -s "$shared/nobodys" "$shared/daemon-link"
out=$(victim "ckpt-dir=$shared/%u-link/ckpt")
is "$(grep -c '^ran' <<<"$out")" 0 "a planted symbolic link: the task never ran" ||
	diag "$out"
like "$out" "daemon-link is a symbolic link" "... the message says so"
is "$(ls -A "$shared/nobodys")" "" "... nothing created where it points"

# --- the ordinary case
out=$(victim "ckpt-dir=$shared/%u/ckpt/%j")
dir=$(sed -n 's/^ran //p' <<<"$out")
like "$dir" "^$shared/daemon/ckpt/[0-9]+$" "daemon's own directory: the task ran" ||
	diag "$out"
is "$(stat -c '%a %U' "$dir" 2>&1)" "700 daemon" "... created 0700, owned by daemon"
is "$(stat -c '%a %U' "$shared/daemon" 2>&1)" "700 daemon" "... and its new parent too"

# --- %s, the step id: two steps of one job, a directory each
out=$(as daemon env SLURM_CONF="$SLURM_CONF" salloc -Q -N1 bash -c \
	"srun -Q --horovod=ckpt-dir=$shared/%u/steps/%j.%s -N1 -n1 bash -c 'echo \"ran \$SLURM_JOB_ID.\$SLURM_STEP_ID \$HOROVOD_CHECKPOINT_DIR\"'; \
	 srun -Q --horovod=ckpt-dir=$shared/%u/steps/%j.%s -N1 -n1 bash -c 'echo \"ran \$SLURM_JOB_ID.\$SLURM_STEP_ID \$HOROVOD_CHECKPOINT_DIR\"'" 2>&1)
want=$(sed -n 's|^ran \([0-9]*\.[0-9]*\) .*|\1|p' <<<"$out" | sed "s|^|$shared/daemon/steps/|" | tr '\n' ' ')
got=$(sed -n 's/^ran [^ ]* //p' <<<"$out" | tr '\n' ' ')
[[ $got == "$want" && $got == *.0\ *.1\  ]]
ok $? "ckpt-dir %j.%s: steps 0 and 1 of one job get a directory each ($got)" || diag "$out"

# --- root's step refused too below nobody's directory
out=$(cd "$wd" && run_timeout "$T" srun -Q --horovod=ckpt-dir="$shared/hvd-ckpt/root" \
	-N1 -n1 bash -c 'echo ran' 2>&1)
is "$(grep -c '^ran' <<<"$out")" 0 "root's step below nobody's directory: refused too" ||
	diag "$out"
exit 0
