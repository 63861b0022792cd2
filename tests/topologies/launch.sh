#!/bin/bash
# Runs every launcher line that fastreduce-topo prints and checks that each
# rank ends up bound to the PUs of its plan (fastreduce-topo --json).
#
#   launch.sh [TOOL]
#
# On this machine's topology the lines run for real: the Open MPI line under
# mpirun, the MPICH line under mpiexec.mpich, each rank printing its own
# Cpus_allowed_list. Host names in the printed lines (NODE<j> placeholders,
# --hosts) become localhost, so a rankfile for several nodes runs all its
# ranks here. On the hwloc fixtures (FR_LAUNCH_FIXTURES, default "dgx-8gpu uneven-numa
# cpu-only", "" for none) nothing can bind, so: Open MPI's one-line forms are mapped by
# mpirun against the fixture (ras simulator, --do-not-launch, its
# --display-map; a line whose every run crashed mpirun is counted as
# skipped, see fixture_ompi); a rankfile is parsed by mpirun with the fixture as
# its topology and its slots are resolved by hwloc-calc as Open MPI resolves
# them (logical cores); MPICH's line is bound by Hydra in HYDRA_TOPO_DEBUG
# mode on the fixture. The lines are parsed from the output, never
# hard-coded, so a wrong line fails here.
#
# Both launchers run where installed (FR_MPI_FLAVOR/MPIEXEC name the build's,
# which must be there). Ends with "N passed, M failed"; exit 0, 1 on a
# failure, 77 when no launcher is installed, 99 without the tool.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tool=${1:-${top_builddir:-../..}/tools/fastreduce-topo}
if [ ! -x "$tool" ]; then
    echo "launch.sh: $tool not found (build first, or pass the binary)" >&2
    exit 99
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The printed lines must work without the oversubscription the other tests allow.
unset OMPI_MCA_rmaps_base_oversubscribe OMPI_MCA_hwloc_base_binding_policy HYDRA_BINDING FASTREDUCE_TOPO_XML HWLOC_XMLFILE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
skip=0
ompi=
mpich=
command -v mpirun >/dev/null && mpirun --version 2>&1 | grep -q 'Open MPI' && ompi=mpirun
command -v mpiexec.mpich >/dev/null && mpich=mpiexec.mpich
case ${FR_MPI_FLAVOR:-} in
    openmpi) [ -n "$ompi" ] || { echo "FAIL: the build's Open MPI has no mpirun"; fail=1; } ;;
    mpich) [ -n "$mpich" ] || { echo "FAIL: the build's MPICH has no mpiexec.mpich"; fail=1; } ;;
esac
if [ -z "$ompi$mpich" ]; then
    echo "SKIP: neither Open MPI's mpirun nor mpiexec.mpich is installed"
    exit 77
fi
hwloc_calc=$(command -v hwloc-calc || true)

ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# expand LIST: "0-2,5" -> "0,1,2,5" (sorted, unique)
expand() {
    local r out=() lo hi
    IFS=, read -ra r <<<"$1"
    for x in "${r[@]}"; do
        [ -n "$x" ] || continue
        lo=${x%-*}; hi=${x#*-}
        for ((v = lo; v <= hi; v++)); do out+=("$v"); done
    done
    printf '%s\n' "${out[@]}" | sort -n | uniq | paste -sd, -
}

# plan_field FIELD ARGS...: one line per local rank, its "pus" or "cores" of
# the plan expanded ("" when unbound)
plan_field() {
    local field=$1
    shift
    "$tool" "$@" --json | sed -n 's/.*"local_rank": \([0-9]*\),.*"'"$field"'": \("[^"]*"\|\[[^]]*\]\).*/\2/p' |
        tr -d '"[] ' | while read -r l; do expand "$l"; done
}

# check WHAT EXPECTED-FILE GOT-FILE: both "rank pus" lines, any order
check() {
    if [ ! -s "$3" ]; then
        bad "$1: no rank reported ($(tail -c 400 "$tmp/log" | tr '\n' ' '))"
    elif diff <(sort -n "$2") <(sort -n "$3") >"$tmp/diff"; then
        ok
    else
        bad "$1: bindings differ from the plan (< plan, > got):"
        sed 's/^/    /' "$tmp/diff" | head -n 12
    fi
}

# expected NPR NODES PLANFILE NONEPUS: "rank pus" for every rank of the job
expected() {
    local n=$1 nodes=$2 plan=$3 none=$4 r=0 j i pus
    for ((j = 0; j < nodes; j++)); do
        i=0
        while read -r pus; do
            pus=${pus:-$none}
            echo "$((j * n + i))${pus:+ $pus}"
            i=$((i + 1)); r=$((r + 1))
        done <"$plan"
    done
}

# words LINE: WORDS=(the line's words) with every host made localhost, and
# the rankfile's name after --rankfile replaced by $tmp/rankfile, written
# from the printed rankfile lines.
words() {
    read -ra WORDS <<<"$1"
    local i
    for ((i = 0; i < ${#WORDS[@]}; i++)); do
        case ${WORDS[i]} in
            # one machine stands for every node: the job's nodes merge into it
            --host) WORDS[i + 1]=localhost:${WORDS[i + 1]##*:} ;;
            -hosts) WORDS[i + 1]=localhost ;;
        esac
        if [ "${WORDS[i]}" = --rankfile ]; then
            WORDS[i + 1]=$tmp/rankfile
            sed -n 's/^      \(rank [0-9]*\)=[^ ]* \(slot=.*\)$/\1=localhost \2/p' "$tmp/out" >"$tmp/rankfile"
        fi
    done
}

# rank_cmd VAR: what each rank runs: print "RANK PUS" from its own affinity
rank_cmd() {
    printf 'echo "$%s $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' "$1"
}

# run_line WHAT LINE RANKVAR: run one printed line here and compare with
# the plan: $tmp/exp for a rankfile (every rank of every node runs here),
# else $tmp/exp1 (the nodes named on the line merge into this one).
run_line() {
    local exp=$tmp/exp1
    words "$2"
    [ ! -f "$tmp/rankfile" ] || exp=$tmp/exp
    timeout 60 "${WORDS[@]}" sh -c "$(rank_cmd "$3")" </dev/null >"$tmp/log" 2>&1
    tr -d '\r' <"$tmp/log" | grep -E '^[0-9]+ [0-9,-]+$' |
        while read -r r l; do echo "$r $(expand "$l")"; done >"$tmp/got"
    rm -f "$tmp/rankfile"
    check "$1: $2" "$exp" "$tmp/got"
}

# run_real NODES TOOL-ARGS...: the printed lines of one plan on this machine
run_real() {
    local nodes=$1 what n
    shift
    what="fastreduce-topo $*"
    if ! "$tool" "$@" --plan-only >"$tmp/out" 2>"$tmp/log"; then
        bad "$what: exit status $?"
        return
    fi
    n=$(sed -n 's/^launch \([0-9]*\) ranks per node.*/\1/p' "$tmp/out")
    plan_field pus "$@" >"$tmp/plan"
    expected "$n" "$nodes" "$tmp/plan" "$allpus" >"$tmp/exp"
    expected "$n" 1 "$tmp/plan" "$allpus" >"$tmp/exp1"
    [ -z "$ompi" ] || run_line "$what, Open MPI" "$(sed -n 's/^  Open MPI: //p' "$tmp/out")" OMPI_COMM_WORLD_RANK
    [ -z "$mpich" ] || run_line "$what, MPICH" "$(sed -n 's/^  MPICH:    //p' "$tmp/out")" PMI_RANK
}

# ---- this machine ------------------------------------------------------------
allpus=$(expand "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)")
for mode in core numa none; do
    for n in 1 2 3 4; do run_real 1 --ranks "$n" --bind "$mode"; done
done
# the rankfile of a job of two nodes (both localhost here), named or not
run_real 2 --ranks 3 --bind core --nodes 2
run_real 2 --ranks 2 --bind core --nodes 2
run_real 1 --ranks 2 --bind core --hosts localhost
run_real 1 --ranks 3 --bind core --hosts localhost
# --rankfile FILE writes the same lines as printed, and the line reads FILE
if "$tool" --ranks 3 --bind core --nodes 2 --rankfile "$tmp/written" --plan-only >"$tmp/out" 2>&1 &&
    diff <(sed -n 's/^      rank /rank /p' "$tmp/out") "$tmp/written" >/dev/null &&
    grep -q "^  Open MPI: mpirun -np 6 --rankfile $tmp/written" "$tmp/out"; then
    ok
else
    bad "fastreduce-topo --rankfile FILE: FILE differs from the printed rankfile or is not on the Open MPI line"
fi

# ---- the fixtures: mapped, parsed and resolved, not run -----------------------
# brackets: Open MPI's "[BB/../..][../..]" -> the logical cores marked B
brackets() {
    [ "$1" != UNBOUND ] || return 0
    tr -d '[' <<<"$1" | tr ']' '/' | tr '/' '\n' | grep -v '^$' | grep -n B | cut -d: -f1 |
        while read -r c; do echo $((c - 1)); done | paste -sd, -
}

# fixture_ompi XML LINE: Open MPI's one-line form mapped on the fixture
# (its plain map: "Process rank: R Bound: ...:[BB/../..][..]" or "Bound:
# N/A"). mpirun ends --do-not-launch with an error. Printing the map,
# Open MPI 4.1.4 reads processes' cpusets it never set and crashes in
# some runs (opal_hwloc_base_cset2mapstr, SIGSEGV): a crashed run is
# retried, and a line whose every run crashed is counted as skipped and
# named, never as passed; a map that differs from the plan fails.
fixture_ompi() {
    words "$2"
    local try
    for try in 1 2 3 4; do
        timeout 60 "${WORDS[@]}" --mca ras simulator --mca ras_simulator_num_nodes 1 --mca ras_simulator_slots 4096 \
            --mca ras_simulator_topo_files "$1" --do-not-launch --display-map true </dev/null >"$tmp/log" 2>&1
        grep -q 'Process rank: [0-9]* Bound:' "$tmp/log" && break
        grep -q 'Signal: Segmentation fault' "$tmp/log" || break
    done
    if ! grep -q 'Process rank: [0-9]* Bound:' "$tmp/log" && grep -q 'Signal: Segmentation fault' "$tmp/log"; then
        echo "SKIP: $(basename "$1"): Open MPI: $2: mpirun crashed printing its map in $try runs"
        skip=$((skip + 1))
        return
    fi
    sed -n 's/.*Process rank: \([0-9]*\) Bound: .*/\1/p' "$tmp/log" >"$tmp/ranks"
    sed -n 's/.*Process rank: [0-9]* Bound: //p' "$tmp/log" | sed 's/^N\/A$/UNBOUND/; s/^.*:\(\[.*\]\)$/\1/' |
        while read -r b; do echo "$(brackets "$b")"; done >"$tmp/cores"
    paste -d' ' "$tmp/ranks" "$tmp/cores" | sed 's/ $//' >"$tmp/got"
    check "$(basename "$1"): Open MPI: $2 (mapped by mpirun on the fixture)" "$tmp/expc" "$tmp/got"
}

# fixture_rankfile XML LINE: mpirun parses the rankfile against the fixture,
# hwloc-calc resolves each slot= as Open MPI does (logical cores)
fixture_rankfile() {
    words "$2"
    # (binding to the fixture's PUs fails here with a warning; mapping must not)
    timeout 60 "${WORDS[@]}" --mca hwloc_base_topo_file "$1" sh -c 'echo launched' </dev/null >"$tmp/log" 2>&1
    if [ "$?" = 0 ] && [ "$(grep -c '^launched$' "$tmp/log")" = "$(grep -c '^rank ' "$tmp/rankfile")" ]; then
        ok
    else
        bad "$(basename "$1"): mpirun refused the rankfile of '$2': $(grep -v '^-*$' "$tmp/log" | head -n 3 | tr '\n' ' ')"
    fi
    [ -n "$hwloc_calc" ] || return
    sed -n 's/^rank \([0-9]*\)=[^ ]* slot=\(.*\)$/\1 \2/p' "$tmp/rankfile" | while read -r r slots; do
        # shellcheck disable=SC2046
        echo "$r $(expand "$("$hwloc_calc" --input "$1" -I pu --po $(tr ',' '\n' <<<"$slots" | sed 's/^/core:/'))")"
    done >"$tmp/got"
    check "$(basename "$1"): the rankfile of $2 (slots resolved by hwloc-calc)" "$tmp/exp" "$tmp/got"
    rm -f "$tmp/rankfile"
}

# fixture_mpich XML LINE: Hydra binds on the fixture in HYDRA_TOPO_DEBUG mode
fixture_mpich() {
    words "$2"
    HYDRA_TOPO_DEBUG=1 HWLOC_XMLFILE=$1 timeout 60 "${WORDS[@]}" true </dev/null >"$tmp/log" 2>&1
    sed -n 's/^process \([0-9]*\) binding: \([01]*\)$/\1 \2/p' "$tmp/log" | while read -r r bits; do
        echo "$r $(grep -o . <<<"$bits" | grep -n 1 | cut -d: -f1 | while read -r b; do echo $((b - 1)); done | paste -sd, -)"
    done >"$tmp/got"
    check "$(basename "$1"): MPICH: $2 (bound by Hydra on the fixture)" "$tmp/exp" "$tmp/got"
}

run_fixture() {
    local xml=$1 n
    shift
    "$tool" --xml "$xml" "$@" --plan-only >"$tmp/out" 2>"$tmp/log" || { bad "fastreduce-topo --xml $xml $*: exit status $?"; return; }
    n=$(sed -n 's/^launch \([0-9]*\) ranks per node.*/\1/p' "$tmp/out")
    plan_field pus --xml "$xml" "$@" >"$tmp/plan"
    expected "$n" 1 "$tmp/plan" "" >"$tmp/exp"
    plan_field cores --xml "$xml" "$@" >"$tmp/plan"
    expected "$n" 1 "$tmp/plan" "" >"$tmp/expc"
    local line
    if [ -n "$ompi" ]; then
        line=$(sed -n 's/^  Open MPI: //p' "$tmp/out")
        case $line in
            *--rankfile*) fixture_rankfile "$xml" "$line" ;;
            *) fixture_ompi "$xml" "$line" ;;
        esac
    fi
    line=$(sed -n 's/^  MPICH:    //p' "$tmp/out")
    [ -z "$mpich" ] || [[ $line = *"-bind-to none"* ]] || fixture_mpich "$xml" "$line"
}

for f in ${FR_LAUNCH_FIXTURES-dgx-8gpu uneven-numa cpu-only}; do
    for mode in gpu core numa none; do
        [ "$mode" = gpu ] && ! grep -q '"gpus": \[$' <("$tool" --xml "$here/$f.xml" --json) && continue
        for n in 2 3 6 8; do run_fixture "$here/$f.xml" --ranks "$n" --bind "$mode"; done
    done
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
