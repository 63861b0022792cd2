#!/usr/bin/env bash
# Test of benchmarks/fastreduce-plot on the fixtures of tests/plot/:
#   tune.csv           fastreduce-tune --csv: allreduce and bcast, 4 ranks,
#                      failed / pruned / declined / skipped / error rows,
#                      crossovers at 16K and 1M (allreduce), 16K and 8M (bcast)
#   ar_table.txt       fr_osu_allreduce --full -c, table driven, 4 ranks:
#                      shm, then recursive_doubling from 16K, ring from 256K
#   bcast_vsmpi.txt    fr_osu_bcast --vs-mpi --algo pipeline, 2 ranks
#   osu_allreduce.txt  the OSU osu_allreduce (no busbw, no rank count)
# Exit status: 0 pass, 1 fail, 77 skip (no gnuplot).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${FASTREDUCE_PLOT:-}" ]; then
    plot=$FASTREDUCE_PLOT
elif [ -n "${srcdir:-}" ] && [ -f "$srcdir/../benchmarks/fastreduce-plot" ]; then
    plot=$srcdir/../benchmarks/fastreduce-plot      # automake: srcdir is tests/
else
    plot=$here/../../benchmarks/fastreduce-plot
fi
# absolute: the checks run the script from other folders
plot=$(cd "$(dirname -- "$plot")" && pwd)/$(basename -- "$plot") || { echo "FAIL: no $plot"; exit 1; }
fix=$here

if ! command -v "${GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
    echo "SKIP: gnuplot not found"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/test_plot.XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
trap 'rm -rf "$work"' EXIT

fails=0
passes=0
pass() { echo "ok   $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
expect() {   # expect DESCRIPTION COMMAND...: pass when COMMAND succeeds
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
check() {   # check DESCRIPTION EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then pass "$1"
    else fail "$1"; printf '       expected: %s\n       got:      %s\n' "$2" "$3"; fi
}

expect "script $plot is executable" test -x "$plot"

# The gnuplot script of one PNG from --print-script output (blocks start
# with "# fastreduce-plot: ...").
section() {   # section FILE PNG-SUFFIX
    awk -v want="$2" '/^# fastreduce-plot: / { on = index($0, want) > 0 } on' "$1"
}
# The plot titles of a script, one a line, in order.
series() {
    sed -n 's/^\(plot \|     \)\$d[0-9]* using .* title "\(.*\)"\(, \\\)\{0,1\}$/\2/p'
}
# The x of every crossover line ("set arrow N from first X, graph 0 ...").
arrows() {
    sed -n 's/^set arrow [0-9]* from first \([0-9]*\), graph 0 to first \([0-9]*\), graph 1 nohead.*/\1 \2/p' |
        awk '$1 == $2 { print $1 } $1 != $2 { print "slanted:" $0 }'
}
labels() {
    sed -n 's/^set label [0-9]* "\(.*\)" at first \([0-9]*\), graph .*/\2=\1/p'
}
# The sizes (or whole rows, with ROWS=1) of the datablock plotted as LABEL.
block() {   # block LABEL  (script on stdin)
    awk -v lab="$1" -v rows="${ROWS:-0}" '
        /^\$d[0-9]+ << EOD$/ { cur = $1; inb = 1; next }
        inb && /^EOD$/ { inb = 0; next }
        inb { data[cur] = data[cur] (rows ? $0 : $1) "|"; next }
        /^(plot |     )\$d[0-9]+ using/ {
            s = $0; sub(/^ *(plot )? */, "", s); d = s; sub(/ .*/, "", d)
            t = s; sub(/.* title "/, "", t); sub(/"(, \\)?$/, "", t)
            if (t == lab) { print data[d]; found = 1 }
        }
        END { if (!found) print "(no series " lab ")" }'
}
joinl() { paste -sd'|' -; }

# ---------------------------------------------------------------- PNGs
mkdir -p "$work/out"
out=$(cd "$work" && "$plot" -o out/all --title "test run" \
        "$fix/tune.csv" "$fix/ar_table.txt" "$fix/bcast_vsmpi.txt" "$fix/osu_allreduce.txt" 2>"$work/err")
rc=$?
check "all fixtures: exit status" 0 "$rc"
check "all fixtures: nothing on stderr" "" "$(cat "$work/err")"
check "all fixtures: one 'wrote' line per PNG" \
    "fastreduce-plot: wrote out/all-allreduce-latency.png|fastreduce-plot: wrote out/all-allreduce-busbw.png|fastreduce-plot: wrote out/all-bcast-latency.png|fastreduce-plot: wrote out/all-bcast-busbw.png" \
    "$(printf '%s\n' "$out" | joinl)"
for c in allreduce bcast; do
    for w in latency busbw; do
        png=$work/out/all-$c-$w.png
        if [ ! -f "$png" ]; then fail "$c-$w.png exists"; continue; fi
        sig=$(od -An -tx1 -N8 "$png" | tr -d ' \n')
        check "$c-$w.png has the PNG signature" "89504e470d0a1a0a" "$sig"
        size=$(wc -c <"$png")
        expect "$c-$w.png is $size bytes (> 2 KB)" test "$size" -gt 2048
    done
done
check "no other file written" "all-allreduce-busbw.png all-allreduce-latency.png all-bcast-busbw.png all-bcast-latency.png" \
    "$(cd "$work/out" && printf '%s ' * | sed 's/ $//')"

# default prefix: fastreduce-* in the current folder
mkdir -p "$work/def"
(cd "$work/def" && "$plot" "$fix/osu_allreduce.txt" >/dev/null 2>&1)
check "default prefix" "fastreduce-allreduce-busbw.png fastreduce-allreduce-latency.png" \
    "$(cd "$work/def" && printf '%s ' * | sed 's/ $//')"

# ---------------------------------------------------------------- CSV script
"$plot" --print-script -o "$work/p/csv" "$fix/tune.csv" >"$work/csv.gp" 2>"$work/err"
check "csv --print-script: exit status" 0 "$?"
check "csv --print-script: nothing on stderr" "" "$(cat "$work/err")"
check "csv --print-script: no PNG written" "" "$(ls "$work"/p 2>/dev/null)"
check "csv --print-script: one script per PNG" \
    "$work/p/csv-allreduce-latency.png|$work/p/csv-allreduce-busbw.png|$work/p/csv-bcast-latency.png|$work/p/csv-bcast-busbw.png" \
    "$(sed -n 's/^set output "\(.*\)"$/\1/p' "$work/csv.gp" | joinl)"
for w in latency busbw; do
    s=$(section "$work/csv.gp" "allreduce $w")
    check "csv allreduce $w: series" "mpi|recursive_doubling|ring chunk=64K|shm" "$(series <<<"$s" | joinl)"
    check "csv allreduce $w: crossovers" "16384|1048576" "$(arrows <<<"$s" | joinl)"
    check "csv allreduce $w: crossover labels" "16384=recursive_doubling|1048576=ring chunk=64K" "$(labels <<<"$s" | joinl)"
    check "csv allreduce $w: recursive_doubling has no failed (1M) or pruned (8M) point" \
        "4|32|256|2048|16384|131072|" "$(block recursive_doubling <<<"$s")"
    check "csv allreduce $w: ring chunk=64K has no declined point" \
        "2048|16384|131072|1048576|8388608|" "$(block "ring chunk=64K" <<<"$s")"
    check "csv allreduce $w: mpi has only allreduce rows" \
        "4|32|256|2048|16384|131072|1048576|8388608|" "$(block mpi <<<"$s")"
    s=$(section "$work/csv.gp" "bcast $w")
    check "csv bcast $w: series" "binomial|mpi|pipeline chunk=1M fanout=4" "$(series <<<"$s" | joinl)"
    check "csv bcast $w: crossovers" "16384|8388608" "$(arrows <<<"$s" | joinl)"
    check "csv bcast $w: crossover labels" "16384=pipeline chunk=1M fanout=4|8388608=mpi" "$(labels <<<"$s" | joinl)"
    check "csv bcast $w: binomial has no error (8M) point" \
        "4|32|256|2048|16384|131072|1048576|" "$(block binomial <<<"$s")"
    check "csv bcast $w: pipeline has no skipped (4) point" \
        "32|256|2048|16384|131072|1048576|8388608|" "$(block "pipeline chunk=1M fanout=4" <<<"$s")"
done
s=$(section "$work/csv.gp" "allreduce latency")
check "csv latency: log x and log y" "2" "$(grep -c '^set logscale [xy]' <<<"$s")"
check "csv latency: rows are latency, busbw from the CSV" "2048 1.756 1.7494" \
    "$(ROWS=1 block recursive_doubling <<<"$s" | tr '|' '\n' | grep '^2048 ')"
check "csv latency: size tic labels" '"4" 4, "16" 16, "64" 64, "256" 256, "1K" 1024, "4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304, "8M" 8388608' \
    "$(sed -n 's/^set xtics (\(.*\))$/\1/p' <<<"$s")"
expect "csv latency plots column 2" grep -q 'using 1:2 ' <<<"$s"
s=$(section "$work/csv.gp" "allreduce busbw")
check "csv busbw: log x only" "set logscale x 2" "$(grep '^set logscale' <<<"$s")"
expect "csv busbw plots column 3" grep -q 'using 1:3 ' <<<"$s"
expect "PNG terminal" grep -q '^set terminal pngcairo \|^set terminal png ' "$work/csv.gp"

# rows in another order give the same scripts
{ head -n 1 "$fix/tune.csv"; tail -n +2 "$fix/tune.csv" | sort -r; } >"$work/shuffled.csv"
"$plot" --print-script -o "$work/p/csv" "$work/shuffled.csv" >"$work/shuffled.gp" 2>&1
expect "csv: row order does not matter" cmp -s "$work/csv.gp" "$work/shuffled.gp"

# ---------------------------------------------------------------- OSU scripts
"$plot" --print-script "$fix/ar_table.txt" "$fix/bcast_vsmpi.txt" "$fix/osu_allreduce.txt" >"$work/osu.gp" 2>"$work/err"
check "osu --print-script: exit status" 0 "$?"
check "osu --print-script: nothing on stderr" "" "$(cat "$work/err")"
s=$(section "$work/osu.gp" "allreduce latency")
check "osu allreduce: series" "fastreduce (table)|MPI (osu_allreduce)" "$(series <<<"$s" | joinl)"
check "osu allreduce: crossovers (table-driven file)" "16384|262144" "$(arrows <<<"$s" | joinl)"
check "osu allreduce: crossover labels" "16384=recursive_doubling|262144=ring" "$(labels <<<"$s" | joinl)"
check "osu allreduce --full: latency from 'Avg Latency(us)', busbw from 'busbw(GB/s)'" "16384 4.14 5.94" \
    "$(ROWS=1 block "fastreduce (table)" <<<"$s" | tr '|' '\n' | grep '^16384 ')"
check "real OSU: busbw computed (2 ranks assumed)" "1048576 352.03 2.97866" \
    "$(ROWS=1 block "MPI (osu_allreduce)" <<<"$s" | tr '|' '\n' | grep '^1048576 ')"
s=$(section "$work/osu.gp" "allreduce busbw")
expect "osu allreduce busbw: title says 2 ranks are assumed" grep -q '^set title ".*assumes 2 ranks' <<<"$s"
s=$(section "$work/osu.gp" "bcast latency")
check "osu bcast --vs-mpi: series" "pipeline|MPI" "$(series <<<"$s" | joinl)"
check "osu bcast forced run: no crossover" "" "$(arrows <<<"$s" | joinl)"
check "osu bcast --vs-mpi: MPI latency and busbw (algbw)" "1048576 200.00 5.24288" \
    "$(ROWS=1 block MPI <<<"$s" | tr '|' '\n' | grep '^1048576 ')"
check "osu bcast --vs-mpi: fastreduce from fastreduce(us)" "1048576 118.61 8.84" \
    "$(ROWS=1 block pipeline <<<"$s" | tr '|' '\n' | grep '^1048576 ')"
check "osu bcast: 21 sizes (trailing comment ignored)" 21 \
    "$(block pipeline <<<"$s" | tr '|' '\n' | grep -c .)"

# a forced fr_osu run whose Algorithm column changes still gives no crossover
sed 's/algorithm from the tuning table/algorithm shm/' "$fix/ar_table.txt" >"$work/forced.txt"
s=$("$plot" --print-script "$work/forced.txt" 2>&1 | section /dev/stdin "allreduce latency")
check "forced run: labelled with the algorithm" "shm" "$(series <<<"$s" | joinl)"
check "forced run: no crossover" "" "$(arrows <<<"$s" | joinl)"

# two files with the same labels: the file names tell them apart
cp "$fix/ar_table.txt" "$work/second.txt"
s=$("$plot" --print-script "$fix/ar_table.txt" "$work/second.txt" 2>&1 | section /dev/stdin "allreduce latency")
check "same label from two files" "fastreduce (table) [ar_table.txt]|fastreduce (table) [second.txt]" \
    "$(series <<<"$s" | joinl)"
check "same crossovers from two files: one line each" "16384|262144" "$(arrows <<<"$s" | joinl)"

# CSV and OSU output together
s=$("$plot" --print-script "$fix/tune.csv" "$fix/bcast_vsmpi.txt" 2>&1 | section /dev/stdin "bcast latency")
check "csv + osu: bcast series" "binomial|mpi|pipeline chunk=1M fanout=4|pipeline|MPI" "$(series <<<"$s" | joinl)"

# the printed script is complete: gnuplot makes the PNG from it alone
mkdir -p "$work/alone"
(cd "$work/alone" && section ../osu.gp "bcast busbw" | sed 's|^set output .*|set output "alone.png"|' | "${GNUPLOT:-gnuplot}" >/dev/null 2>&1)
expect "printed script runs in gnuplot" test -s "$work/alone/alone.png"

# ---------------------------------------------------------------- errors
expect_error() {   # expect_error DESCRIPTION STATUS WORD-IN-MESSAGE ARGS...
    local what=$1 want=$2 word=$3
    shift 3
    (cd "$work" && "$plot" "$@") >"$work/eout" 2>"$work/eerr"
    local rc=$? lines
    lines=$(grep -c . "$work/eerr")
    if [ "$rc" = "$want" ] && [ "$lines" = 1 ] && grep -qF -- "$word" "$work/eerr" &&
            grep -q '^fastreduce-plot: ' "$work/eerr"; then
        pass "$what: exit $rc, $(cat "$work/eerr")"
    else
        fail "$what: exit $rc (want $want), stderr:"; sed 's/^/       /' "$work/eerr"
    fi
}
: >"$work/empty.txt"
printf 'hello\nthis is not a benchmark\n' >"$work/neither.txt"
printf 'collective,algorithm,bytes\nallreduce,ring,4\n' >"$work/badheader.csv"
head -n 1 "$fix/tune.csv" >"$work/headeronly.csv"
grep -v ',ok,' "$fix/tune.csv" >"$work/nook.csv"
{ head -n 1 "$fix/tune.csv"; echo "allreduce,host,4,1,4,ring,,4,ok"; } >"$work/short.csv"
grep -v '^# OSU' "$fix/osu_allreduce.txt" >"$work/notitle.txt"
grep -v '^[0-9]' "$fix/ar_table.txt" >"$work/norows.txt"
mkdir -p "$work/folder"
expect_error "missing file" 1 "missing.csv" missing.csv
expect_error "missing file after a good one" 1 "missing.txt" "$fix/tune.csv" missing.txt
expect_error "empty file" 1 "empty.txt" empty.txt
expect_error "file of neither kind" 1 "neither.txt" neither.txt
expect_error "CSV without the expected header" 1 "badheader.csv" badheader.csv
expect_error "CSV with only the header" 1 "headeronly.csv" headeronly.csv
expect_error "CSV without ok rows" 1 "nook.csv" nook.csv
expect_error "CSV row with missing fields" 1 "short.csv" short.csv
expect_error "OSU output without title" 1 "notitle.txt" notitle.txt
expect_error "OSU output without rows" 1 "norows.txt" norows.txt
expect_error "folder given as FILE" 1 "folder" folder
if [ "$(id -u)" != 0 ]; then
    cp "$fix/tune.csv" "$work/unreadable.csv"; chmod 000 "$work/unreadable.csv"
    expect_error "unreadable file" 1 "unreadable.csv" unreadable.csv
else
    echo "skip unreadable file (running as root)"
fi
GNUPLOT=/nonexistent/gnuplot expect_error "gnuplot missing" 1 "gnuplot" "$fix/tune.csv"
printf '#!/bin/sh\ncat >/dev/null; echo "line 7: all points y value undefined!" >&2; exit 1\n' >"$work/badgnuplot"
chmod +x "$work/badgnuplot"
GNUPLOT=$work/badgnuplot expect_error "gnuplot failing" 1 "line 7: all points" "$fix/tune.csv"
expect_error "output folder missing" 1 "nofolder" -o nofolder/x "$fix/tune.csv"
expect_error "no FILE" 2 "no input FILE"
expect_error "unknown option" 2 "--bogus" --bogus "$fix/tune.csv"
expect_error "-o without argument" 2 "-o" "$fix/tune.csv" -o
expect_error "--title without argument" 2 "--title" "$fix/tune.csv" --title
check "no PNG written by the error cases" "" "$(cd "$work" && ls ./*.png nofolder 2>/dev/null)"

"$plot" --help >"$work/help" 2>&1
check "--help: exit status" 0 "$?"
expect "--help prints the usage" grep -q '^usage: fastreduce-plot ' "$work/help"
"$plot" -h >/dev/null 2>&1
check "-h: exit status" 0 "$?"

echo "$passes passed, $fails failed"
[ "$fails" -gt 0 ] && exit 1
exit 0
