#!/bin/bash
# docs/environment.md's table of settings names every row of lib/settings.c,
# in the table's order, with its default (a default written as a path of
# the installation, like $prefix/share/fastreduce, is not compared).
info=${top_builddir:-..}/tools/fastreduce-info
docs=${srcdir:-.}/../docs/environment.md
[ -x "$info" ] || { echo "SKIP: $info not built"; exit 77; }
[ -f "$docs" ] || { echo "SKIP: $docs not found"; exit 77; }
rows() { sed -n 's/^| `\(FASTREDUCE_[A-Z_]*\)` | \([^|]*\) |.*/\1 \2/p' | sed 's/ *$//'; }
want=$("$info" --settings --markdown | rows)
have=$(awk '/^## /{n++} n==0' "$docs" | rows)
if [ "$(echo "$want" | cut -d' ' -f1)" != "$(echo "$have" | cut -d' ' -f1)" ]; then
    echo "FAIL: the settings of docs/environment.md differ from fastreduce-info --settings --markdown:"
    diff <(echo "$want" | cut -d' ' -f1) <(echo "$have" | cut -d' ' -f1) 2>/dev/null ||
        { echo "want:"; echo "$want"; echo "docs:"; echo "$have"; }
    exit 1
fi
bad=$(echo "$want" | paste -d' ' - <(echo "$have") 2>/dev/null | awk '$4 !~ /\$/ && $2 != $4 {print $1 ": " $2 " in the table, " $4 " in the docs"}')
[ -z "$bad" ] || { echo "FAIL: defaults differ:"; echo "$bad"; exit 1; }
echo "PASS: docs/environment.md lists the $(echo "$want" | wc -l) settings with their defaults"
