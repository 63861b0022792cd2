/* The launcher lines of fastreduce-topo: the Open MPI and MPICH command
 * lines (and Open MPI's rankfile) that bind N ranks per node as the plan
 * says. Each line is one that Open MPI 4.1 and MPICH 4 accept as printed. */
#include <stdlib.h>
#include <string.h>
#include "hwtopo.h"

/* Whether rank i holds cores [i*k, (i+1)*k): what --map-by ppr:N:node:PE=k gives. */
static int ppr_exact(const fr_topo_t *t, const fr_plan_t *p, int *k)
{
    *k = p->rank[0].ncores;
    if (*k < 1 || (long)*k * p->nranks > t->ncores) return 0;
    for (int i = 0; i < p->nranks; i++) {
        if (p->rank[i].ncores != *k) return 0;
        for (int j = 0; j < *k; j++)
            if (p->rank[i].cores[j] != i * *k + j) return 0;
    }
    return 1;
}

/* Whether some NUMA node gets more ranks than it has cores: Open MPI then
 * refuses --bind-to numa unless told that overloading is allowed. */
static int numa_overloaded(const fr_topo_t *t, const fr_plan_t *p)
{
    for (int n = 0; n < t->nnuma; n++) {
        int k = 0;
        for (int i = 0; i < p->nranks; i++) k += p->rank[i].numa == n;
        if (k > t->numa[n].ncores) return 1;
    }
    return 0;
}

int fr_launch_nodes(const fr_launch_t *l)
{
    return l && l->nnodes > 0 ? l->nnodes : 1;
}

/* Node j's name: the host given, else the placeholder NODEj. */
static void node_name(const fr_launch_t *l, int j, char *buf, size_t len)
{
    if (l && l->hosts && l->hosts[j]) snprintf(buf, len, "%s", l->hosts[j]);
    else snprintf(buf, len, "NODE%d", j);
}

void fr_rankfile_write(FILE *f, const fr_plan_t *p, const fr_launch_t *l, const char *indent)
{
    char host[256], slot[512];
    for (int j = 0; j < fr_launch_nodes(l); j++) {
        node_name(l, j, host, sizeof host);
        for (int i = 0; i < p->nranks; i++) {
            /* the plan lists a rank's cores in ascending order, as the ranges want */
            fr_topo_ranges(p->rank[i].cores, p->rank[i].ncores, slot, sizeof slot);
            fprintf(f, "%srank %d=%s slot=%s\n", indent, j * p->nranks + i, host, slot);
        }
    }
}

/* Whether the lines name the nodes: hosts given, or placeholders for several. */
static int names_nodes(const fr_launch_t *l)
{
    return l && (l->hosts || l->nnodes > 1);
}

/* "a:N,b:N" for Open MPI's --host (@p slots > 0), or "a,b" for MPICH's -hosts. */
static void host_list(FILE *f, const fr_launch_t *l, int slots)
{
    char host[256];
    for (int j = 0; j < fr_launch_nodes(l); j++) {
        node_name(l, j, host, sizeof host);
        fprintf(f, "%s%s", j ? "," : "", host);
        if (slots) fprintf(f, ":%d", slots);
    }
}

static void openmpi_rankfile(FILE *f, const fr_topo_t *t, const fr_plan_t *p, const fr_launch_t *l)
{
    int nodes = fr_launch_nodes(l), named = l && l->hosts;
    const char *file = l && l->rankfile ? l->rankfile : "RANKFILE";
    fprintf(f, "  Open MPI: mpirun -np %d --rankfile %s%s\n", p->nranks * nodes, file,
            p->nranks > t->ncores ? " --oversubscribe" : "");
    fprintf(f, "    %s, one rankfile for the whole job (%d node%s; %s):\n", file, nodes, nodes > 1 ? "s" : "",
            l && l->rankfile ? "written by this command" : "--rankfile FILE writes it");
    fr_rankfile_write(f, p, l, "      ");
    if (!named)
        fprintf(f, "    with NODE<j> replaced by node j's host name (or pass --hosts a,b,...; --nodes M for M nodes)\n");
    fprintf(f, "    slot= lists logical core indices (lstopo's); mpirun takes the hosts from the rankfile:\n"
               "    give it no --host, --hostfile or --map-by (Open MPI 4.1 refuses them)\n");
}

/* The one-line forms; the caller has ruled out the plans that need a rankfile. */
static void openmpi_line(FILE *f, const fr_topo_t *t, const fr_plan_t *p, const fr_launch_t *l)
{
    int n = p->nranks, k;
    fprintf(f, "  Open MPI: mpirun");
    if (names_nodes(l)) {
        fprintf(f, " --host ");
        host_list(f, l, n);
    }
    if (p->mode == FR_BIND_NONE)
        fprintf(f, " --map-by ppr:%d:node --bind-to none", n);
    else if (p->mode == FR_BIND_NUMA)
        fprintf(f, " --map-by ppr:%d:node --rank-by numa --bind-to numa%s", n,
                numa_overloaded(t, p) ? ":overload-allowed" : "");
    else if (ppr_exact(t, p, &k))
        fprintf(f, " --map-by ppr:%d:node:PE=%d --bind-to core", n, k);
    /* more ranks than cores: Open MPI counts a node's slots as its cores */
    fprintf(f, "%s\n", n > t->ncores ? " --oversubscribe" : "");
}

/* Hydra wants each rank's PUs (OS indices) as single numbers joined by '+'. */
static void mpich_user(FILE *f, const fr_topo_t *t, const fr_plan_t *p)
{
    char buf[512];
    for (int i = 0; i < p->nranks; i++) {
        fr_plan_cpulist(t, &p->rank[i], buf, sizeof buf);
        int first = 1;
        fprintf(f, "%s", i ? "," : "");
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            int lo, hi;
            if (sscanf(tok, "%d-%d", &lo, &hi) != 2) hi = lo = atoi(tok);
            for (int v = lo; v <= hi; v++, first = 0) fprintf(f, "%s%d", first ? "" : "+", v);
        }
    }
}

void fr_launch_print(FILE *f, const fr_topo_t *t, const fr_plan_t *p, const fr_launch_t *l)
{
    int n = p->nranks, k;
    fprintf(f, "\nlaunch %d ranks per node like this:\n", n);
    int rankfile = p->mode != FR_BIND_NONE &&
                   ((l && l->rankfile) || (p->mode != FR_BIND_NUMA && !ppr_exact(t, p, &k)));
    if (rankfile) openmpi_rankfile(f, t, p, l);
    else openmpi_line(f, t, p, l);
    fprintf(f, "  MPICH:    mpiexec.mpich");
    if (names_nodes(l)) {
        fprintf(f, " -hosts ");
        host_list(f, l, 0);
    }
    fprintf(f, " -ppn %d -bind-to ", n);
    if (p->mode == FR_BIND_NONE) fprintf(f, "none");
    else {
        fprintf(f, "user:");
        mpich_user(f, t, p);
    }
    fprintf(f, "\n");
    if (names_nodes(l)) {
        if (!(l && l->hosts) && !rankfile) fprintf(f, "  NODE<j>: the host name of node j\n");
        return;
    }
    if (rankfile) fprintf(f, "  hostfile: MPICH \"NODE:%d\"\n", n);
    else fprintf(f, "  hostfile: Open MPI \"NODE slots=%d\", MPICH \"NODE:%d\"\n", n, n);
}
