#!/usr/bin/env bash
# The library's layers, each including only its own and those below it:
#   core (lib/core) <- topology <- transport (lib/transport) <- algorithms
#   <- select (lib/select) <- api (lib/api) <- programs (tools/, benchmarks/)
# Every #include "..." of the library's sources is checked against that
# order; the programs include the public header, config.h, their own
# folders' headers and lib/api/internal.h only, and read a communicator
# through internal.h's accessors (no "comm->"); examples/ include the
# public header only. Headers must not include each other in a cycle.
# Prints each violation and ends with "layers: N passed, M failed".
# Usage: tests/layers.sh [SOURCE_DIR]   (under make check: srcdir)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${1:-$(cd "${srcdir:-$here}/.." && pwd)}
cd "$top" || exit 1

# The layer of a folder: the allowed directions, written once.
layer_of() {
    case $1 in
        include/*) echo 0 ;;
        lib/core/*) echo 1 ;;
        topology/*) echo 2 ;;
        lib/transport/*) echo 3 ;;
        algorithms/*) echo 4 ;;
        lib/select/*) echo 5 ;;
        lib/api/*) echo 6 ;;
        tools/* | benchmarks/*) echo 7 ;;
        examples/*) echo 8 ;;
        *) echo -1 ;;
    esac
}
names=(public core topology transport algorithms select api programs examples)

passed=0; failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# Every header of the layers, by the name that #include uses.
declare -A where
for h in include/*.h lib/*/*.h topology/*.h algorithms/*.h tools/*.h benchmarks/*.h; do
    [ -e "$h" ] || continue
    n=${h##*/}
    [ -n "${where[$n]:-}" ] && fail "$h: header name also used by ${where[$n]} (includes go by name)"
    where[$n]=$h
done

edges=$(mktemp) || exit 1
trap 'rm -f "$edges"' EXIT
for f in lib/*/*.[ch] topology/*.[ch] algorithms/*.[ch] tools/*.[ch] benchmarks/*.[ch] examples/*.c; do
    [ -e "$f" ] || continue
    from=$(layer_of "$f")
    while IFS=: read -r line inc; do
        inc=${inc#*\"}; inc=${inc%%\"*}
        [ "$inc" = config.h ] && continue
        h=${where[$inc]:-}
        if [ -z "$h" ]; then fail "$f:$line: includes \"$inc\", which is no header of the layers"; continue; fi
        to=$(layer_of "$h")
        case $f in *.h) [ "${h##*/}" != "${f##*/}" ] && echo "$h $f" >>"$edges" ;; esac
        if [ "$to" -gt "$from" ]; then
            fail "$f:$line: ${names[$from]} includes \"$inc\" of ${names[$to]}, a layer above it"
        elif [ "$from" -ge 7 ] && [ "$to" -ge 1 ] && [ "$to" -lt 7 ] && [ "$inc" != internal.h ]; then
            fail "$f:$line: ${names[$from]} includes \"$inc\" of ${names[$to]}: programs go through internal.h"
        elif [ "$from" = 8 ] && [ "$to" != 0 ]; then
            fail "$f:$line: an example includes \"$inc\": examples use the public header only"
        else
            passed=$((passed + 1))
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done

# The programs read a communicator through internal.h's accessors.
while IFS= read -r hit; do fail "$hit: a program reads a communicator's field (use internal.h's accessors)"; done \
    < <(grep -n 'comm->' tools/*.c benchmarks/*.c 2>/dev/null)

# Headers that include each other in a cycle (tsort names the loop).
if loop=$(tsort "$edges" 2>&1 >/dev/null) && [ -z "$loop" ]; then
    passed=$((passed + 1))
else
    fail "headers include each other in a cycle: $(echo "$loop" | tr '\n' ' ')"
fi

echo "layers: $passed passed, $failed failed"
[ "$failed" = 0 ]
