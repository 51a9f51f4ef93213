#!/bin/bash
# hvd-topo on the fixture topologies: text and --json (valid JSON, checked
# with python3's json module), the reference answers through the tool, and
# its refusals.
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/spank
topo=${top_builddir:-../..}/spank/hvd-topo
n=0
fails=0
ok() { # status description
	n=$((n + 1))
	if [[ $1 == 0 ]]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
echo "1..12"
if ! command -v python3 >/dev/null; then
	for i in $(seq 12); do echo "ok $i # SKIP python3 not installed"; done
	exit 0
fi
# jsonq FILE EXPR: evaluate a Python expression on the parsed JSON `j`.
jsonq() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

out=$(mktemp -d "${TMPDIR:-/var/tmp}/hvd-topo.XXXXXX")
trap 'rm -rf "$out"' EXIT

"$topo" --topology "$srcdir/topologies/mpibind__coral-lassen__P9_4xV100_4xmlx5.xml" --json >"$out/lassen.json"
ok $? "hvd-topo --json on lassen"
python3 -m json.tool "$out/lassen.json" >/dev/null
ok $? "lassen output is valid JSON"
got=$(jsonq "$out/lassen.json" '",".join(r["env"]["NCCL_IB_HCA"] for r in j["ranks"])')
[[ $got == "=mlx5_0:1,=mlx5_1:1,=mlx5_2:1,=mlx5_3:1" ]]
ok $? "lassen: GPU i -> mlx5_i ($got)"
got=$(jsonq "$out/lassen.json" '[r["local_rank"] for r in j["ranks"]] == [0,1,2,3] and all("NCCL_IB_HCA" in r["why"] for r in j["ranks"])')
[[ $got == True ]]
ok $? "lassen: 4 ranks, each with a reason"

"$topo" --topology "$srcdir/topologies/mpibind__cts1-pascal__BDW_2xP100_1xmlx5.xml" --json --gpus 1 --local-size 2 >"$out/cts1.json"
python3 -m json.tool "$out/cts1.json" >/dev/null
ok $? "cts1 --gpus 1: valid JSON"
got=$(jsonq "$out/cts1.json" '",".join(r["env"]["CUDA_VISIBLE_DEVICES"] for r in j["ranks"])')
[[ $got == "1,1" ]]
ok $? "cts1 --gpus 1: both ranks on GPU 1 ($got)"
got=$(jsonq "$out/cts1.json" 'j["ranks"][0]["why"]["NCCL_IB_HCA"]')
[[ $got == *"PCI switch"* ]]
ok $? "cts1: reason names the PCI switch ($got)"

"$topo" --topology "$srcdir/topologies/mpibind__epyc-corona-p2__8xAMDGPU_1xmlx5.xml" --json --local-size 2 >"$out/corona.json"
got=$(jsonq "$out/corona.json" 'any(k.startswith("CUDA") for r in j["ranks"] for k in r["env"])')
[[ $got == False ]]
ok $? "corona (AMD GPUs only): no CUDA variable"

# Quotes and backslashes in a user-kept value stay valid JSON.
NCCL_IB_HCA='x"y\z' "$topo" --topology "$srcdir/topologies/mpibind__epyc-corona-p2__8xAMDGPU_1xmlx5.xml" --json --env >"$out/esc.json"
got=$(jsonq "$out/esc.json" 'j["ranks"][0]["env"]["NCCL_IB_HCA"] + " " + j["ranks"][0]["action"]["NCCL_IB_HCA"]')
[[ $got == 'x"y\z kept' ]]
ok $? "user value with quote and backslash kept, JSON escaped ($got)"

"$topo" --topology "$srcdir/hwloc1-2numa-2gpu-2hca.xml" >"$out/v1.txt"
grep -q 'port mlx5_1:1 state 1' "$out/v1.txt"
ok $? "text output on hwloc 1.x XML lists the DOWN port"

"$topo" --topology "$srcdir/hwloc1-2numa-2gpu-2hca.xml" --horovod ckpt-every=x >/dev/null 2>"$out/err.txt"
st=$?
[[ $st == 2 ]] && grep -q 'ckpt-every=x: expected' "$out/err.txt"
ok $? "bad --horovod refused with the plugin's message (status $st)"
"$topo" --topology "$srcdir/hwloc1-2numa-2gpu-2hca.xml" --policy 'ckpt_roots=/scratch' --horovod ckpt-dir=/etc/x >/dev/null 2>"$out/err.txt"
st=$?
[[ $st == 1 ]] && grep -q 'outside' "$out/err.txt"
ok $? "ckpt-dir outside the policy's roots refused (status $st)"
exit $((fails > 0))
