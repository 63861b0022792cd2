# Sourced by the scripts that compare launches side by side (ab.sh,
# zcopy.sh): a folder for the launches' output, and the loop over numbers
# of ranks, collectives and rounds, so that every comparison is made of
# launches taken in turn, round after round.

# A temporary folder in $out, removed at exit.
rounds_folder() {
    out=$(mktemp -d) || exit 1
    trap 'rm -rf "$out"' EXIT
}

# rounds_for_each ROUNDS ONE_ROUND REPORT NP...: for each NP and each of
# allreduce and bcast, ONE_ROUND NP COLL R for R = 1..ROUNDS (the round's
# launches, in turn), then a "## COLL np=NP" heading and REPORT NP COLL.
rounds_for_each() {
    local rounds=$1 one=$2 report=$3 np coll r
    shift 3
    for np in "$@"; do
        for coll in allreduce bcast; do
            for r in $(seq "$rounds"); do "$one" "$np" "$coll" "$r"; done
            echo
            echo "## $coll np=$np"
            "$report" "$np" "$coll"
        done
    done
}
