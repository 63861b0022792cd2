/* fastreduce-topo: show the node (NUMA nodes, cores, GPUs, NICs and the
 * distances between them) and the binding plan for N ranks per node, with
 * the mpirun lines that realise it. Needs no MPI launch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

#define MAX_HOSTS 4096

typedef struct opts {
    const char *xml, *rankfile;
    int ranks, json, plan_only, mode, nodes;
    char *hosts[MAX_HOSTS + 1];  /* NULL-terminated; points into hostbuf */
    char *hostbuf;
} opts_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fastreduce-topo [--xml FILE] [--ranks N] [--bind MODE] [--json] [--plan-only]\n"
            "                       [--nodes M | --hosts A,B,...] [--rankfile FILE]\n"
            "  --xml FILE      read an hwloc XML topology instead of this machine\n"
            "                  (default: FASTREDUCE_TOPO_XML, then HWLOC_XMLFILE, then this machine)\n"
            "  --ranks N       also print the binding plan of N ranks per node\n"
            "  --bind MODE     plan as FASTREDUCE_BIND=MODE: auto, core, numa, gpu, none (default: auto,\n"
            "                  what the library does to unbound ranks: gpu when the node has GPUs, else none)\n"
            "  --json          print the same facts as JSON\n"
            "  --plan-only     print only the plan (with --ranks)\n"
            "  --nodes M       the launcher lines are for a job of M nodes, named NODE0.. (default 1)\n"
            "  --hosts A,B     ... of the nodes with these host names\n"
            "  --rankfile FILE write Open MPI's rankfile for the whole job to FILE, and launch with it\n");
}

/* A whole number from lo to hi, else -1 with a message naming the option. */
static int number(const char *opt, const char *v, int lo, int hi)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || !*v || n < lo || n > hi) {
        fprintf(stderr, "fastreduce-topo: %s wants a number from %d to %d, not '%s'\n", opt, lo, hi, v);
        return -1;
    }
    return (int)n;
}

static int split_hosts(opts_t *o, const char *v)
{
    int n = 0;
    free(o->hostbuf);
    o->hostbuf = strdup(v);
    if (!o->hostbuf) return -1;
    for (char *h = strtok(o->hostbuf, ","); h && n < MAX_HOSTS; h = strtok(NULL, ",")) o->hosts[n++] = h;
    o->hosts[n] = NULL;
    if (!n) fprintf(stderr, "fastreduce-topo: --hosts wants host names separated by commas\n");
    return n ? n : -1;
}

/* 0: parsed; 1: --help printed; 2: bad arguments (a message printed). */
static int parse(int argc, char **argv, opts_t *o)
{
    int nhosts = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = v && (!strcmp(a, "--xml") || !strcmp(a, "--ranks") || !strcmp(a, "--bind") ||
                          !strcmp(a, "--nodes") || !strcmp(a, "--hosts") || !strcmp(a, "--rankfile"));
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--plan-only")) o->plan_only = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        else if (!takes) { usage(stderr); return 2; }
        else if (i++, !strcmp(a, "--xml")) o->xml = v;
        else if (!strcmp(a, "--rankfile")) o->rankfile = v;
        else if (!strcmp(a, "--ranks")) { if ((o->ranks = number(a, v, 1, 4096)) < 0) return 2; }
        else if (!strcmp(a, "--nodes")) { if ((o->nodes = number(a, v, 1, MAX_HOSTS)) < 0) return 2; }
        else if (!strcmp(a, "--hosts")) { if ((nhosts = split_hosts(o, v)) < 0) return 2; }
        else if ((o->mode = fr_bind_mode_parse(v)) < 0) {
            fprintf(stderr, "fastreduce-topo: --bind wants auto, none, core, numa or gpu, not '%s'\n", v);
            return 2;
        }
    }
    if (nhosts && o->nodes && o->nodes != nhosts) {
        fprintf(stderr, "fastreduce-topo: --nodes %d but --hosts names %d\n", o->nodes, nhosts);
        return 2;
    }
    if (nhosts) o->nodes = nhosts;
    if ((o->plan_only || o->rankfile) && !o->ranks) {
        fprintf(stderr, "fastreduce-topo: %s needs --ranks N\n", o->plan_only ? "--plan-only" : "--rankfile");
        return 2;
    }
    return 0;
}

/* Writes --rankfile's file; 0 on success. */
static int write_rankfile(const opts_t *o, const fr_plan_t *plan, const fr_launch_t *launch)
{
    if (plan->mode == FR_BIND_NONE) {
        fprintf(stderr, "fastreduce-topo: --rankfile: the plan binds no rank (--bind none, or auto on a node "
                        "without GPUs); name a mode: --bind core\n");
        return 2;
    }
    FILE *f = fopen(o->rankfile, "w");
    if (!f) {
        perror(o->rankfile);
        return 1;
    }
    fr_rankfile_write(f, plan, launch, "");
    return fclose(f) ? (perror(o->rankfile), 1) : 0;
}

static int show(const opts_t *o, const fr_topo_t *t)
{
    fr_plan_t plan = {0};
    fr_launch_t launch = {.nnodes = o->nodes, .hosts = o->hosts[0] ? o->hosts : NULL, .rankfile = o->rankfile};
    if (o->ranks && fr_plan_make(t, o->ranks, o->mode, NULL, &plan) != FR_SUCCESS) {
        fprintf(stderr, "fastreduce-topo: %s\n", fr_last_error());
        return 1;
    }
    int rc = o->rankfile ? write_rankfile(o, &plan, &launch) : 0;
    if (!rc && o->json) fr_topo_print_json(stdout, t, o->ranks ? &plan : NULL);
    else if (!rc) {
        if (!o->plan_only) fr_topo_print(stdout, t);
        if (o->ranks) {
            if (!o->plan_only) printf("\n");
            fr_plan_print(stdout, t, &plan, &launch);
        }
    }
    fr_plan_free(&plan);
    return rc;
}

int main(int argc, char **argv)
{
    static opts_t o = {.mode = FR_BIND_AUTO};
    int rc = parse(argc, argv, &o);
    if (rc) {
        free(o.hostbuf);
        return rc == 1 ? 0 : rc;
    }
    fr_log_init();
    fr_settings_t set = {0};
    fr_settings_load(&set, NULL, -1, FR_S_BIT(FR_S_TOPO_XML));
    fr_topo_t *t;
    fr_status_t st = fr_topo_load(o.xml ? o.xml : fr_topo_xml_of(&set), &t);
    fr_settings_free(&set);
    if (st != FR_SUCCESS) {
        fprintf(stderr, "fastreduce-topo: %s\n", fr_last_error());
        free(o.hostbuf);
        return 1;
    }
    rc = show(&o, t);
    fr_topo_free(t);
    free(o.hostbuf);
    return rc;
}
