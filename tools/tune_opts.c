/* fastreduce-tune's command line: the usage text and the parsing of the
 * options into opts_t. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "tuner.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np N " PROG " [options]\n"
            "       mpirun -np N " PROG " --check TABLE [options]\n"
            "Measures every algorithm that can serve this job (and its chunk/fanout/across variants)\n"
            "at sizes from --min to --max (powers of two and the points half way), and writes the\n"
            "fastest per size as a tuning table (docs/tuning.md) plus a CSV of every measurement.\n"
            "  -o, --output FILE   table to write (default fastreduce-<fingerprint>-<nodes>x<ppn>.tune)\n"
            "      --csv FILE      measurements (default: the table's name ending in .csv)\n"
            "  -b, --budget SEC    bound on the whole run in seconds (default 300; --check: 120)\n"
            "  -m, --max SIZE      largest message (default 64M); --min SIZE smallest (default 4)\n"
            "  -r, --reps N        timed repetitions per point, median reported (default 5, 3..101)\n"
            "  -c, --coll LIST     allreduce, bcast or both (default allreduce,bcast)\n"
            "  -a, --algos LIST    only these algorithms (comma-separated names)\n"
            "  -d, --memory LIST   host, cuda or host,cuda (default host, and cuda when every rank\n"
            "                      has a GPU and the build has NCCL): device buffers measure nccl\n"
            "                      (NCCL's own choice), nccl_ring and nccl_tree with each protocol\n"
            "      --check TABLE   re-measure a sample of sizes; report ranges where TABLE's choice is\n"
            "                      no longer the fastest (exit status 3 when one is stale); the rules\n"
            "                      of the memory types of --memory (default host)\n"
            "      --buffers private|shared  host buffers of posix_memalign (default) or of\n"
            "                      fr_mem_alloc, shared by the node's ranks: shm then measures its\n"
            "                      zero-copy path, as a trainer with such buffers runs it\n"
            "  -q, --quiet         one progress line per size instead of per measurement\n"
            "  -h, --help          this text\n"
            "Data: float32 sum out of place (allreduce), root 0 (bcast). A point's figure\n"
            "is the median over the repetitions of the slowest rank's time per call.\n");
}

/* A comma-separated list of @p names[0] and @p names[1] (--OPT LIST), as
 * the bits @p bits of them; sets @p bad on an unknown name or an empty
 * list (WHAT and NONE name them in the message). */
static unsigned parse_list(const char *arg, const char *opt, const char *const names[2], const unsigned bits[2],
                           const char *what, const char *none, char *bad, size_t blen)
{
    unsigned set = 0;
    char *dup = strdup(arg), *save = NULL;
    for (char *w = dup ? strtok_r(dup, ",", &save) : NULL; w; w = strtok_r(NULL, ",", &save)) {
        if (!strcmp(w, names[0])) set |= bits[0];
        else if (!strcmp(w, names[1])) set |= bits[1];
        else { snprintf(bad, blen, "--%s: unknown %s '%s' (%s, %s)", opt, what, w, names[0], names[1]); break; }
    }
    free(dup);
    if (!bad[0] && !set) snprintf(bad, blen, "--%s: no %s given", opt, none);
    return set;
}

/* The numeric options (--budget, --max, --min, --reps) into @p o; sets
 * @p bad when @p arg is not a number in the option's range. */
static void parse_number(int ch, const char *arg, opts_t *o, char *bad, size_t blen)
{
    char *end;
    switch (ch) {
    case 'b':
        o->budget = strtod(arg, &end);
        if (*end || !(o->budget >= 1 && o->budget <= 1e6))
            snprintf(bad, blen, "--budget '%s': expected seconds from 1 to 1000000", arg);
        break;
    case 'm': case 'M': {
        uint64_t v;
        if (fr_parse_size(arg, &v) || v == 0 || v > ((uint64_t)1 << 34))
            snprintf(bad, blen, "--%s '%s': expected a size from 1 to 16G (4, 8K, 64M)",
                     ch == 'm' ? "max" : "min", arg);
        else if (ch == 'm') o->max = v;
        else o->min = v;
        break;
    }
    case 'r': {
        long v = strtol(arg, &end, 10);
        if (*end || v < 3 || v > 101) snprintf(bad, blen, "--reps '%s': expected 3..101", arg);
        o->reps = (int)v;
        break;
    }
    }
}

int tn_parse_opts(int argc, char **argv, opts_t *o, int rank)
{
    static const struct option lo[] = {
        { "output", 1, 0, 'o' }, { "csv", 1, 0, 'C' }, { "budget", 1, 0, 'b' }, { "max", 1, 0, 'm' },
        { "min", 1, 0, 'M' }, { "reps", 1, 0, 'r' }, { "coll", 1, 0, 'c' }, { "algos", 1, 0, 'a' },
        { "check", 1, 0, 'K' }, { "quiet", 0, 0, 'q' }, { "memory", 1, 0, 'd' }, { "help", 0, 0, 'h' },
        { "buffers", 1, 0, 'B' }, { 0, 0, 0, 0 }
    };
    char bad[256] = "";
    int budget_set = 0;
    *o = (opts_t){ .budget = 300, .min = 4, .max = 64u << 20, .reps = REPS_DEFAULT,
                   .colls = (1 << FR_COLL_ALLREDUCE) | (1 << FR_COLL_BCAST) };
    opterr = 0;
    int ch;
    while (!bad[0] && (ch = getopt_long(argc, argv, ":o:b:m:r:c:a:qhd:", lo, NULL)) != -1) {
        switch (ch) {
        case 'o': o->out = optarg; break;
        case 'C': o->csv = optarg; break;
        case 'K': o->check = optarg; break;
        case 'a': o->algos = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'B':
            if (!strcmp(optarg, "shared") || !strcmp(optarg, "private")) o->shared = !strcmp(optarg, "shared");
            else snprintf(bad, sizeof bad, "--buffers: '%s' is neither private nor shared", optarg);
            break;
        case 'b': case 'm': case 'M': case 'r':
            parse_number(ch, optarg, o, bad, sizeof bad);
            budget_set |= ch == 'b';
            break;
        case 'c':
            o->colls = (int)parse_list(optarg, "coll", (const char *const[]){ "allreduce", "bcast" },
                                       (const unsigned[]){ 1 << FR_COLL_ALLREDUCE, 1 << FR_COLL_BCAST },
                                       "collective", "collective", bad, sizeof bad);
            break;
        case 'd':
            o->mems = parse_list(optarg, "memory", (const char *const[]){ "host", "cuda" },
                                 (const unsigned[]){ FR_MEM_HOST, FR_MEM_CUDA }, "memory", "memory type", bad,
                                 sizeof bad);
            break;
        case 'h':
            if (rank == 0) usage(stdout);
            return 1;
        case ':': snprintf(bad, sizeof bad, "option '%s' needs an argument", argv[optind - 1]); break;
        default: snprintf(bad, sizeof bad, "unknown option '%s'", argv[optind - 1]); break;
        }
    }
    if (!bad[0] && optind < argc) snprintf(bad, sizeof bad, "unexpected argument '%s'", argv[optind]);
    if (!bad[0] && o->min > o->max) snprintf(bad, sizeof bad, "--min is larger than --max");
    if (!bad[0] && o->check && o->out) snprintf(bad, sizeof bad, "--check does not write a table (no -o)");
    if (o->check && !budget_set) o->budget = 120;
    if (bad[0]) {
        if (rank == 0) fprintf(stderr, PROG ": %s\n(" PROG " --help lists the options)\n", bad);
        return 2;
    }
    return 0;
}
