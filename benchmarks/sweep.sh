#!/usr/bin/env bash
# Measure every algorithm of a collective side by side, for building the
# default table by hand (the autotuner will replace this): prints one column
# per algorithm, the median latency in us of fr_osu_<coll> --algo NAME.
# Usage: benchmarks/sweep.sh BUILD_DIR allreduce|bcast NP "ALGOS" [MAX] [extra env, e.g. FASTREDUCE_NODE_SIZE=1]
set -euo pipefail
build=$1; coll=$2; np=$3; algos=$4; max=${5:-67108864}; shift 5 || shift $#
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for a in $algos; do
    env "$@" mpirun -np "$np" "$build/benchmarks/fr_osu_$coll" -m 4:"$max" -i 50 -x 5 --algo "$a" |
        awk '!/^#/ {print $1, $2}' >"$tmp/$a"
done
printf "%-10s" size; for a in $algos; do printf " %18s" "$a"; done; printf " %18s\n" best
set -- $algos
paste $(for a in $algos; do echo "$tmp/$a"; done) | awk -v names="$algos" '
    BEGIN { n = split(names, nm, " ") }
    { printf "%-10s", $1; best = ""; bv = 1e30
      for (i = 1; i <= n; i++) { v = $(2 * i); printf " %18s", v; if (v + 0 < bv) { bv = v + 0; best = nm[i] } }
      printf " %18s\n", best }'
