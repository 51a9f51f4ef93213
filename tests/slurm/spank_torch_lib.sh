# shellcheck shell=bash
# tests/slurm/spank_torch_lib.sh: sourced by spank_torch*.sh, after lib.sh.
#
# torch_ok: true when /usr/bin/python3 has torch (Debian's python3-torch;
# the python3 first on PATH may be another interpreter without it).
# torch_script DIR: writes DIR/allreduce.py, a torch.distributed program
# that needs nothing but the environment srun --horovod gives it:
#
#   allreduce.py TAG [PEER_TAG]
#
# init_process_group("gloo", init_method="env://"), then, with PEER_TAG,
# every rank waits until the step tagged PEER_TAG has also initialised (a
# file DIR/TAG.up, DIR/PEER_TAG.up), so that the two steps provably run at
# the same time; then an allreduce of [rank + 1, 10 (rank + 1)], and one
# line per rank:
#
#   TAG rank R size S MASTER_ADDR:MASTER_PORT SUM0 SUM1
#
# with SUM0 = S(S+1)/2 and SUM1 = 10 SUM0 when the step's ranks met only
# each other.  Bounded: the store and the peer wait time out (exit 3).
TORCH_PY=/usr/bin/python3

torch_ok() {
	[[ -x $TORCH_PY ]] && "$TORCH_PY" -c 'import torch.distributed' 2>/dev/null
}

torch_script() { # dir
	cat >"$1/allreduce.py" <<'PY'
import datetime, os, sys, time
import torch
import torch.distributed as dist

tag = sys.argv[1]
peer = sys.argv[2] if len(sys.argv) > 2 else None
here = os.path.dirname(os.path.abspath(__file__))
dist.init_process_group("gloo", init_method="env://",
                        timeout=datetime.timedelta(seconds=60))
r, s = dist.get_rank(), dist.get_world_size()
if peer:
    open(os.path.join(here, tag + ".up"), "w").close()
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(here, peer + ".up")):
        if time.time() > deadline:
            print(f"{tag} rank {r}: step {peer} never started", flush=True)
            sys.exit(3)
        time.sleep(0.1)
t = torch.tensor([r + 1.0, 10.0 * (r + 1)])
dist.all_reduce(t)
print(f"{tag} rank {r} size {s} {os.environ['MASTER_ADDR']}:"
      f"{os.environ['MASTER_PORT']} {t[0].item():g} {t[1].item():g}",
      flush=True)
dist.barrier()
dist.destroy_process_group()
PY
	chmod 644 "$1/allreduce.py"
}

# torch_expect TAG SIZE: the lines allreduce.py TAG prints in a step of SIZE
# ranks, without the address (sorted).
torch_expect() { # tag size
	local r s0=$(($2 * ($2 + 1) / 2))
	for ((r = 0; r < $2; r++)); do
		echo "$1 rank $r size $2 $s0 $((10 * s0))"
	done
}

# torch_lines TAG OUTPUT: that step's lines without the address (sorted).
torch_lines() { # tag output
	grep "^$1 rank " <<<"$2" | awk '{ print $1, $2, $3, $4, $5, $7, $8 }' | sort
}

# torch_addrs TAG OUTPUT: the distinct MASTER_ADDR:MASTER_PORT of a step.
torch_addrs() { # tag output
	grep "^$1 rank " <<<"$2" | awk '{ print $6 }' | sort -u
}

# node_addr NODE: its NodeAddr from slurmctld.
node_addr() {
	run_timeout 30 scontrol show node "$1" 2>/dev/null |
		sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p'
}
