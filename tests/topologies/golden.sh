#!/bin/bash
# Golden outputs of fastreduce-topo for the fixtures in this folder, and the
# facts about them that must hold whatever the golden files say.
#
#   golden.sh [--regen] [TOOL]
#
# TOOL is the fastreduce-topo binary (default: $top_builddir/lib/fastreduce-topo).
# Without --regen, every output is compared with golden/ and the script ends
# with "N passed, M failed"; with --regen, golden/ is rewritten.
set -u
here=$(cd "$(dirname "$0")" && pwd)
regen=0
if [ "${1:-}" = --regen ]; then regen=1; shift; fi
tool=${1:-${top_builddir:-../..}/tools/fastreduce-topo}
if [ ! -x "$tool" ]; then
    echo "golden.sh: $tool not found (build first, or pass the binary)" >&2
    exit 99
fi
gold=$here/golden
mkdir -p "$gold"
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# outputs NAME ARGS...: one output of the tool, compared or regenerated.
outputs() {
    local name=$1
    shift
    if ! "$tool" "$@" >"$tmp/$name" 2>"$tmp/$name.err"; then
        echo "FAIL: fastreduce-topo $*: exit status $? ($(head -c 300 "$tmp/$name.err"))"
        fail=$((fail + 1))
        return
    fi
    if [ "$regen" = 1 ]; then
        cp "$tmp/$name" "$gold/$name"
    elif diff -u "$gold/$name" "$tmp/$name" >"$tmp/$name.diff" 2>&1; then
        pass=$((pass + 1))
    else
        echo "FAIL: fastreduce-topo $* differs from golden/$name:"
        head -n 30 "$tmp/$name.diff" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

# expect DESCRIPTION FILE EXTENDED-REGEX: a line of FILE must match.
expect() {
    if grep -qE "$3" "$tmp/$2"; then
        pass=$((pass + 1))
    else
        echo "FAIL: $1 (no line of $2 matches '$3')"
        fail=$((fail + 1))
    fi
}

for xml in "$here"/*.xml; do
    f=$(basename "$xml" .xml)
    outputs "$f.txt" --xml "$xml"
    outputs "$f.json" --xml "$xml" --json
    # the plans near the GPUs, or by cores on a node without one (where
    # the default, auto, binds nothing: $f.auto-2.txt)
    mode=gpu
    grep -q "^fingerprint: .*-0gpu-" "$tmp/$f.txt" 2>/dev/null && mode=core
    for n in 1 2 4 8 16; do
        outputs "$f.plan-$n.txt" --xml "$xml" --ranks "$n" --bind "$mode" --plan-only
    done
    outputs "$f.auto-2.txt" --xml "$xml" --ranks 2 --plan-only
done
# (numa mode on the fixture with a memory-only NUMA node)
[ -f "$here/cpuless-numa.xml" ] && outputs cpuless-numa.numa-2.txt --xml "$here/cpuless-numa.xml" --ranks 2 --bind numa --plan-only
[ "$regen" = 1 ] && { echo "golden.sh: wrote $(ls "$gold" | wc -l) files in $gold"; exit 0; }

# The facts each fixture was written to show (tests/topologies/README.md).
if [ -f "$here/dgx-8gpu.xml" ]; then
    for g in 0 1 2 3 4 5 6 7; do
        nic=$((g / 2)); numa=$((g / 4)); c0=$((g * 2)); c1=$((g * 2 + 1))
        expect "dgx-8gpu: rank $g gets GPU $g, NUMA $numa, cores $c0-$c1 and mlx5_$nic" dgx-8gpu.plan-8.txt \
            "^  $g +$numa +$c0-$c1 +[0-9,-]+ +$g \\(cuda$g\\) +mlx5_$nic\$"
    done
    expect "dgx-8gpu: GPU 0 is on mlx5_0's switch and across the sockets from mlx5_3" dgx-8gpu.txt \
        "^GPU 0 +2 +0 +2 +4 +4\$"
    expect "dgx-8gpu: 8 ranks bind like --map-by ppr:8:node:PE=2" dgx-8gpu.plan-8.txt "ppr:8:node:PE=2 --bind-to core"
    expect "dgx-8gpu: the default (auto) binds near the GPUs" dgx-8gpu.auto-2.txt "FASTREDUCE_BIND=gpu:\$"
    expect "dgx-8gpu: 16 ranks, two per GPU, one core each" dgx-8gpu.plan-16.txt "^  8 +0 +4 +[0-9,-]+ +0 \\(cuda0\\) +mlx5_0\$"
    expect "dgx-8gpu: its last-level caches are the two sockets' L3 of 105 MiB" dgx-8gpu.txt \
        "^last-level caches: 2 L3, 210\\.0 MiB in all\$"
    expect "dgx-8gpu: the same in JSON" dgx-8gpu.json '"llc": \{"level": 3, "count": 2, "bytes": 220200960\}'
fi
if [ -f "$here/dgx-port-down.xml" ]; then
    # dgx-8gpu with mlx5_0's only port down (state 1, LID 0)
    expect "dgx-port-down: mlx5_0 is shown down" dgx-port-down.txt "^  NIC mlx5_0 +ib port 1 \\(down\\)  netdev ib0 "
    expect "dgx-port-down: the same in JSON" dgx-port-down.json '"name": "mlx5_0", .* "ports": 1, "down": true,'
    for g in 0 1; do
        expect "dgx-port-down: rank $g (GPU $g, beside mlx5_0) takes mlx5_1 on its NUMA node" dgx-port-down.plan-8.txt \
            "^  $g +0 .* $g \\(cuda$g\\) +mlx5_1\$"
    done
fi
if [ -f "$here/gpu-far-nic.xml" ]; then
    expect "gpu-far-nic: the GPU's only RDMA NIC is across the sockets" gpu-far-nic.txt "^GPU 0 +4\$"
    expect "gpu-far-nic: one rank binds near its GPU (NUMA 0) and still uses mlx5_0" gpu-far-nic.plan-1.txt \
        "^  0 +0 +0-3 +.* mlx5_0\$"
    expect "gpu-far-nic: 8 ranks on 8 cores spill onto NUMA 1 without sharing" gpu-far-nic.plan-8.txt \
        "^  7 +1 +[4-7] "
fi
if [ -f "$here/cpu-only.xml" ]; then
    expect "cpu-only: no GPU in the fingerprint" cpu-only.txt "^fingerprint: .*-0gpu-"
    expect "cpu-only: ranks alternate NUMA nodes" cpu-only.plan-2.txt "^  1 +1 "
    expect "cpu-only: RoCE preferred over plain Ethernet" cpu-only.plan-1.txt "mlx5_0\$"
    expect "cpu-only: the default (auto) binds nothing without GPUs, as the library" cpu-only.auto-2.txt \
        "^plan for 2 rank\\(s\\) per node, FASTREDUCE_BIND=none:\$"
fi
if [ -f "$here/one-core.xml" ]; then
    expect "one-core: 16 ranks share the one core" one-core.plan-16.txt "^  15 +0 +0 +0 .*\\(shares its cores\\)\$"
    expect "one-core: no cache in the XML, no last-level cache size" one-core.txt "^last-level caches: unknown\$"
fi
if [ -f "$here/gpu-bad-index.xml" ]; then
    # CUDA OS devices named cuda2147483647 and cuda-2: no usable index, discovery order kept
    expect "gpu-bad-index: an index past any device is not taken" gpu-bad-index.txt \
        "^  GPU 0 +cuda2147483647 .*\\(index: PCI order\\)\$"
    expect "gpu-bad-index: a negative index is not taken" gpu-bad-index.txt "^  GPU 1 +cuda-2 .*\\(index: PCI order\\)\$"
fi
if [ -f "$here/cpuless-numa.xml" ]; then
    # a memory-only NUMA node (no cores) is never a rank's: both ranks get NUMA 0's core
    expect "cpuless-numa: rank 1 is not put on the NUMA node without cores" cpuless-numa.plan-2.txt "^  1 +0 +0 "
    expect "cpuless-numa: numa mode gives rank 1 a core too" cpuless-numa.numa-2.txt "^  1 +0 +0 "
fi
if [ -f "$here/ib-class0c06.xml" ]; then
    # a ConnectX-3 of PCI class 0x0c06 (not 0x02): found through its OS devices, once with both ports
    expect "ib-class0c06: the HCA of class 0x0c06 is an InfiniBand NIC" ib-class0c06.txt \
        "^  NIC mlx4_0 +ib port 2 of 2  netdev ib0,ib1  \\[0000:04:00\\.0\\]\$"
    expect "ib-class0c06: its ports and interfaces count once" ib-class0c06.txt "^node: .*, 2 NIC\\(s\\)\$"
    expect "ib-class0c06: the fingerprint counts it" ib-class0c06.txt "^fingerprint: .*-1ib1eth\$"
    expect "ib-class0c06: ranks take the HCA, not the Ethernet port" ib-class0c06.plan-2.txt "^  1 .* mlx4_0\$"
    expect "ib-class0c06: its active port (2) in JSON" ib-class0c06.json \
        '"name": "mlx4_0", "netdev": "ib0,ib1", "kind": "ib", "verbs": true, "port": 2, "ports": 2,'
fi
if [ -f "$here/gpu-mixed-cuda.xml" ]; then
    # GPUs 0000:87 and 0000:8f have CUDA devices cuda0 and cuda1; 0000:07 and 0000:0f have none
    expect "gpu-mixed-cuda: cuda0 is GPU 0" gpu-mixed-cuda.txt "^  GPU 0 +cuda0 .*\\[0000:87:00\\.0\\]\$"
    expect "gpu-mixed-cuda: a GPU without a CUDA device is numbered past them" gpu-mixed-cuda.txt \
        "^  GPU 2 +- .*\\[0000:07:00\\.0\\]  \\(index: PCI order; no CUDA device here\\)\$"
    expect "gpu-mixed-cuda: no two GPUs share an index" gpu-mixed-cuda.json \
        '"index": 3, "index_source": "pci", "cuda": -1, "pci_order": 1, "usable": false,'
    for r in 0 1; do
        expect "gpu-mixed-cuda: rank $r gets cuda$r on NUMA 1 and the RoCE NIC" gpu-mixed-cuda.plan-2.txt \
            "^  $r +1 .* $r \\(cuda$r\\) +mlx5_0\$"
    done
    expect "gpu-mixed-cuda: 4 ranks share the two CUDA GPUs" gpu-mixed-cuda.plan-4.txt "^  3 +1 .* 1 \\(cuda1\\) "
    expect "gpu-mixed-cuda: RoCE and Slingshot named from hwloc" gpu-mixed-cuda.txt "^fingerprint: .*-1roce1slingshot\$"
fi
for f in "$tmp"/*.txt; do
    # no plan gives a rank a GPU the topology marks unusable, or one it does not list
    case $f in *plan*) ;; *) continue ;; esac
    bad=$(awk '/^  [0-9]+ / && $6 ~ /\(pci/ { print }' "$f" | head -1)
    if [ -n "$bad" ] && grep -q "no CUDA device here" "${f%.plan-*}.txt" 2>/dev/null; then
        echo "FAIL: $(basename "$f") gives a rank a GPU without a CUDA device: $bad"; fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
