/* fastreduce-topo: show the node (NUMA nodes, cores, GPUs, NICs and the
 * distances between them) and the binding plan for N ranks per node, with
 * the mpirun lines that realise it. Needs no MPI launch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hwtopo.h"
#include "log.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fastreduce-topo [--xml FILE] [--ranks N] [--bind MODE] [--json] [--plan-only]\n"
            "  --xml FILE    read an hwloc XML topology instead of this machine\n"
            "                (default: FASTREDUCE_TOPO_XML, then HWLOC_XMLFILE, then this machine)\n"
            "  --ranks N     also print the binding plan of N ranks per node\n"
            "  --bind MODE   plan as FASTREDUCE_BIND=MODE: core, numa, gpu, none (default: gpu when\n"
            "                the node has GPUs, else core)\n"
            "  --json        print the same facts as JSON\n"
            "  --plan-only   print only the plan (with --ranks)\n");
}

int main(int argc, char **argv)
{
    const char *xml = NULL;
    int ranks = 0, json = 0, plan_only = 0, mode = FR_BIND_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--xml") && v) xml = argv[++i];
        else if (!strcmp(a, "--ranks") && v) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 4096) {
                fprintf(stderr, "fastreduce-topo: --ranks wants a number from 1 to 4096, not '%s'\n", v);
                return 2;
            }
            ranks = (int)n;
            i++;
        } else if (!strcmp(a, "--bind") && v) {
            mode = fr_bind_mode_parse(v);
            if (mode < 0) {
                fprintf(stderr, "fastreduce-topo: --bind wants auto, none, core, numa or gpu, not '%s'\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--plan-only")) plan_only = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (plan_only && !ranks) {
        fprintf(stderr, "fastreduce-topo: --plan-only needs --ranks N\n");
        return 2;
    }
    fr_log_init();
    fr_topo_t *t;
    if (fr_topo_load(xml, &t) != FR_SUCCESS) {
        fprintf(stderr, "fastreduce-topo: %s\n", fr_last_error());
        return 1;
    }
    fr_plan_t plan = {0};
    if (ranks && fr_plan_make(t, ranks, mode, NULL, &plan) != FR_SUCCESS) {
        fprintf(stderr, "fastreduce-topo: %s\n", fr_last_error());
        fr_topo_free(t);
        return 1;
    }
    if (json) fr_topo_print_json(stdout, t, ranks ? &plan : NULL);
    else {
        if (!plan_only) fr_topo_print(stdout, t);
        if (ranks) {
            if (!plan_only) printf("\n");
            fr_plan_print(stdout, t, &plan);
        }
    }
    fr_plan_free(&plan);
    fr_topo_free(t);
    return 0;
}
