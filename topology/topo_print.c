/* fastreduce-topo's output: the node as text or JSON, and the binding plan
 * (its launcher lines are in launch_print.c). */
#include <stdlib.h>
#include <string.h>
#include "hwtopo.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void numa_pus(const fr_topo_t *t, int n, char *buf, size_t len)
{
    fr_plan_rank_t all = {.cores = t->numa[n].cores, .ncores = t->numa[n].ncores};
    fr_plan_cpulist(t, &all, buf, len);
}

/* A GPU's index is its CUDA index unless this says otherwise. */
static void print_gpu(FILE *f, const fr_topo_t *t, const fr_topo_gpu_t *g)
{
    const char *src = g->cuda >= 0 ? "" : t->ncuda ? "  (index: PCI order; no CUDA device here)" : "  (index: PCI order)";
    fprintf(f, "  GPU %-3d %-8s %s  [%s]%s\n", g->index, g->osdev[0] ? g->osdev : "-", g->name, g->pci.busid, src);
}

static void print_nic(FILE *f, const fr_topo_nic_t *n)
{
    char port[32] = "";
    if (n->nports > 1) snprintf(port, sizeof port, " port %d of %d", n->port, n->nports);
    else if (n->nports == 1 || fr_nic_kind_verbs(n->kind)) snprintf(port, sizeof port, " port %d", n->port);
    int other = n->netdev[0] && strcmp(n->netdev, n->name);
    fprintf(f, "  NIC %-8s %s%s%s%s%s  [%s]\n", n->name, fr_nic_kind_name(n->kind), port, n->down ? " (down)" : "",
            other ? "  netdev " : "", other ? n->netdev : "", n->pci.busid[0] ? n->pci.busid : "no PCI");
}

void fr_topo_print(FILE *f, const fr_topo_t *t)
{
    char buf[512];
    fprintf(f, "topology: %s\nfingerprint: %s\n", t->source, t->fingerprint);
    fprintf(f, "node: %d package(s), %d NUMA node(s), %d cores, %d PUs, %d GPU(s), %d NIC(s)\n", t->npackages,
            t->nnuma, t->ncores, t->npus, t->ngpus, t->nnics);
    if (t->llc_level)
        fprintf(f, "last-level caches: %d L%d, %.1f MiB in all\n\n", t->nllc, t->llc_level,
                (double)t->llc_bytes / (1024.0 * 1024.0));
    else
        fprintf(f, "last-level caches: unknown\n\n");
    for (int n = 0; n <= t->nnuma; n++) {
        int any = 0;
        if (n < t->nnuma) {
            fr_topo_ranges(t->numa[n].cores, t->numa[n].ncores, buf, sizeof buf);
            fprintf(f, "NUMA %d (os %d, package %d, %.1f GiB): cores %s", n, t->numa[n].os_index,
                    t->numa[n].package, (double)t->numa[n].mem / GIB, buf);
            numa_pus(t, n, buf, sizeof buf);
            fprintf(f, ", PUs %s\n", buf);
        }
        for (int g = 0; g < t->ngpus; g++)
            if (t->gpu[g].numa == (n < t->nnuma ? n : -1)) {
                if (n == t->nnuma && !any++) fprintf(f, "local to no single NUMA node:\n");
                print_gpu(f, t, &t->gpu[g]);
            }
        for (int k = 0; k < t->nnics; k++)
            if (t->nic[k].numa == (n < t->nnuma ? n : -1)) {
                if (n == t->nnuma && !any++) fprintf(f, "local to no single NUMA node:\n");
                print_nic(f, &t->nic[k]);
            }
    }
    if (!t->ngpus) return;
    if (t->nnics) {
        fprintf(f, "\nGPU x NIC distance (0 same PCIe switch, 1 same host bridge, 2 same NUMA node,"
                   " 3 same package, 4 farther)\n%-7s", "");
        for (int k = 0; k < t->nnics; k++) fprintf(f, " %8s", t->nic[k].name);
        fprintf(f, "\n");
        for (int g = 0; g < t->ngpus; g++) {
            fprintf(f, "GPU %-3d", t->gpu[g].index);
            for (int k = 0; k < t->nnics; k++) fprintf(f, " %8d", fr_topo_gpu_nic_distance(t, g, k));
            fprintf(f, "\n");
        }
    }
    fprintf(f, "\nGPU x NUMA distance (hwloc's NUMA distances from the GPU's NUMA node; 10 = local)\n%-7s", "");
    for (int n = 0; n < t->nnuma; n++) fprintf(f, " %7s%d", "NUMA ", n);
    fprintf(f, "\n");
    for (int g = 0; g < t->ngpus; g++) {
        fprintf(f, "GPU %-3d", t->gpu[g].index);
        for (int n = 0; n < t->nnuma; n++) {
            int from = t->gpu[g].numa;
            if (from < 0) fprintf(f, " %8s", "-");
            else fprintf(f, " %8d", t->numa_dist[from * t->nnuma + n]);
        }
        fprintf(f, "\n");
    }
}

/* ---- the plan -------------------------------------------------------------- */

void fr_plan_print(FILE *f, const fr_topo_t *t, const fr_plan_t *p, const fr_launch_t *launch)
{
    char buf[512];
    fprintf(f, "plan for %d rank(s) per node, FASTREDUCE_BIND=%s:\n", p->nranks, fr_bind_mode_name(p->mode));
    fprintf(f, "  %-5s %-5s %-12s %-16s %-12s %s\n", "rank", "numa", "cores", "PUs", "gpu", "nic");
    for (int i = 0; i < p->nranks; i++) {
        const fr_plan_rank_t *r = &p->rank[i];
        char cores[128], gpu[32];
        fr_topo_ranges(r->cores, r->ncores, cores, sizeof cores);
        fr_plan_cpulist(t, r, buf, sizeof buf);
        if (r->gpu >= 0) snprintf(gpu, sizeof gpu, "%d (%s)", t->gpu[r->gpu].index,
                                  t->gpu[r->gpu].osdev[0] ? t->gpu[r->gpu].osdev : "pci");
        else snprintf(gpu, sizeof gpu, "-");
        char numa[16];
        if (r->numa >= 0) snprintf(numa, sizeof numa, "%d", r->numa);
        else snprintf(numa, sizeof numa, "-");
        fprintf(f, "  %-5d %-5s %-12s %-16s %-12s %s%s\n", i, numa, r->ncores ? cores : "-",
                r->ncores ? buf : "-", gpu, r->nic >= 0 ? t->nic[r->nic].name : "-",
                r->shared ? "  (shares its cores)" : "");
    }
    fr_launch_print(f, t, p, launch);
}

/* ---- JSON ------------------------------------------------------------------ */

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void jints(FILE *f, const int *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", v[i]);
    fputc(']', f);
}

static void json_plan(FILE *f, const fr_topo_t *t, const fr_plan_t *p)
{
    char buf[512];
    fprintf(f, ",\n  \"plan\": {\"ranks\": %d, \"bind\": ", p->nranks);
    jstr(f, fr_bind_mode_name(p->mode));
    fprintf(f, ", \"rank\": [");
    for (int i = 0; i < p->nranks; i++) {
        const fr_plan_rank_t *r = &p->rank[i];
        fr_plan_cpulist(t, r, buf, sizeof buf);
        fprintf(f, "%s\n    {\"local_rank\": %d, \"numa\": %d, \"cores\": ", i ? "," : "", i, r->numa);
        jints(f, r->cores, r->ncores);
        fprintf(f, ", \"pus\": ");
        jstr(f, buf);
        fprintf(f, ", \"shared\": %s, \"gpu\": %d, \"nic\": ", r->shared ? "true" : "false",
                r->gpu >= 0 ? t->gpu[r->gpu].index : -1);
        if (r->nic >= 0) jstr(f, t->nic[r->nic].name);
        else fprintf(f, "null");
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]}");
}

void fr_topo_print_json(FILE *f, const fr_topo_t *t, const fr_plan_t *plan)
{
    char buf[512];
    fprintf(f, "{\n  \"source\": ");
    jstr(f, t->source);
    fprintf(f, ",\n  \"fingerprint\": ");
    jstr(f, t->fingerprint);
    fprintf(f, ",\n  \"packages\": %d, \"cores\": %d, \"pus\": %d,", t->npackages, t->ncores, t->npus);
    if (t->llc_level)
        fprintf(f, "\n  \"llc\": {\"level\": %d, \"count\": %d, \"bytes\": %llu},", t->llc_level, t->nllc,
                t->llc_bytes);
    else
        fprintf(f, "\n  \"llc\": null,");
    fprintf(f, "\n  \"numa\": [");
    for (int n = 0; n < t->nnuma; n++) {
        numa_pus(t, n, buf, sizeof buf);
        fprintf(f, "%s\n    {\"index\": %d, \"os_index\": %d, \"package\": %d, \"memory\": %llu, \"cores\": ",
                n ? "," : "", n, t->numa[n].os_index, t->numa[n].package, t->numa[n].mem);
        jints(f, t->numa[n].cores, t->numa[n].ncores);
        fprintf(f, ", \"pus\": ");
        jstr(f, buf);
        fprintf(f, ", \"distance\": ");
        jints(f, t->numa_dist + n * t->nnuma, t->nnuma);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"gpus\": [");
    for (int g = 0; g < t->ngpus; g++) {
        const fr_topo_gpu_t *x = &t->gpu[g];
        fprintf(f, "%s\n    {\"index\": %d, \"index_source\": ", g ? "," : "", x->index);
        jstr(f, x->cuda >= 0 ? "cuda" : "pci");
        fprintf(f, ", \"cuda\": %d, \"pci_order\": %d, \"usable\": %s, \"osdev\": ", x->cuda, x->pci_order,
                fr_topo_gpu_usable(t, g) ? "true" : "false");
        jstr(f, x->osdev);
        fprintf(f, ", \"name\": ");
        jstr(f, x->name);
        fprintf(f, ", \"busid\": ");
        jstr(f, x->pci.busid);
        fprintf(f, ", \"numa\": %d, \"package\": %d, \"nic_distance\": [", x->numa, x->package);
        for (int k = 0; k < t->nnics; k++) fprintf(f, "%s%d", k ? ", " : "", fr_topo_gpu_nic_distance(t, g, k));
        fprintf(f, "], \"numa_distance\": ");
        if (x->numa >= 0) jints(f, t->numa_dist + x->numa * t->nnuma, t->nnuma);
        else fprintf(f, "null");
        fprintf(f, "}");
    }
    fprintf(f, "%s],\n  \"nics\": [", t->ngpus ? "\n  " : "");
    for (int k = 0; k < t->nnics; k++) {
        const fr_topo_nic_t *x = &t->nic[k];
        fprintf(f, "%s\n    {\"name\": ", k ? "," : "");
        jstr(f, x->name);
        fprintf(f, ", \"netdev\": ");
        jstr(f, x->netdev);
        fprintf(f, ", \"kind\": ");
        jstr(f, fr_nic_kind_name(x->kind));
        fprintf(f, ", \"verbs\": %s, \"port\": %d, \"ports\": %d, \"down\": %s, \"busid\": ",
                fr_nic_kind_verbs(x->kind) ? "true" : "false", x->port, x->nports, x->down ? "true" : "false");
        jstr(f, x->pci.busid);
        fprintf(f, ", \"numa\": %d, \"package\": %d}", x->numa, x->package);
    }
    fprintf(f, "%s]", t->nnics ? "\n  " : "");
    if (plan) json_plan(f, t, plan);
    fprintf(f, "\n}\n");
}
