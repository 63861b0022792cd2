/* The binding plan: which NUMA node, cores, GPU and NIC each local rank of a
 * node gets. A pure function of the topology, so it is tested on fixtures. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "hwtopo.h"
#include "log.h"

int fr_bind_mode_parse(const char *s)
{
    for (int i = 0; s && fr_bind_words[i]; i++)
        if (!strcmp(s, fr_bind_words[i])) return i;
    return -1;
}

const char *fr_bind_mode_name(int mode)
{
    return mode >= 0 && mode <= FR_BIND_GPU ? fr_bind_words[mode] : "?";
}

/* A rank's preferred NUMA node: its GPU's in gpu mode, else round robin.
 * Only NUMA nodes with cores count: a memory-only one has none to give. */
static int preferred_numa(const fr_topo_t *t, int mode, int gpu, int *rr)
{
    if (mode == FR_BIND_GPU && gpu >= 0) {
        const fr_topo_gpu_t *g = &t->gpu[gpu];
        if (g->numa >= 0 && t->numa[g->numa].ncores) return g->numa;
        for (int n = 0; g->package >= 0 && n < t->nnuma; n++)
            if (t->numa[n].package == g->package && t->numa[n].ncores) return n;
    }
    for (int k = 0; k < t->nnuma; k++) {
        int n = (*rr)++ % t->nnuma;
        if (t->numa[n].ncores) return n;
    }
    return 0;   /* (not reached: the node has a core) */
}

/* While the whole node has a core per rank, no NUMA node takes more ranks
 * than it has cores: its last ranks move to the nearest node with room. */
static void spill(const fr_topo_t *t, fr_plan_t *p)
{
    if (p->nranks > t->ncores) return;
    int *load = calloc((size_t)t->nnuma, sizeof *load);
    if (!load) return;
    for (int i = 0; i < p->nranks; i++) load[p->rank[i].numa]++;
    for (int i = p->nranks - 1; i >= 0; i--) {
        int from = p->rank[i].numa;
        if (load[from] <= t->numa[from].ncores) continue;
        int best = -1;
        for (int n = 0; n < t->nnuma; n++)
            if (load[n] < t->numa[n].ncores &&
                (best < 0 || t->numa_dist[from * t->nnuma + n] < t->numa_dist[from * t->nnuma + best]))
                best = n;
        if (best < 0) break;
        load[from]--;
        load[best]++;
        p->rank[i].numa = best;
    }
    free(load);
}

/* Cores of each NUMA node split among the ranks placed there, in rank order. */
static fr_status_t split_cores(const fr_topo_t *t, fr_plan_t *p)
{
    for (int n = 0; n < t->nnuma; n++) {
        const fr_topo_numa_t *nu = &t->numa[n];
        int k = 0, j = 0, c = nu->ncores;
        for (int i = 0; i < p->nranks; i++) k += p->rank[i].numa == n;
        for (int i = 0; i < p->nranks && c > 0; i++) {
            fr_plan_rank_t *r = &p->rank[i];
            if (r->numa != n) continue;
            int lo, hi;
            if (p->mode == FR_BIND_NUMA) lo = 0, hi = c;
            else if (k <= c) lo = (int)((long)j * c / k), hi = (int)((long)(j + 1) * c / k);
            else lo = j % c, hi = lo + 1;
            r->shared = p->mode == FR_BIND_NUMA ? k > 1 : k > c;
            r->ncores = hi - lo;
            r->cores = malloc((size_t)r->ncores * sizeof *r->cores);
            if (!r->cores) return FR_ERROR(FR_ERR_NO_MEMORY, "binding plan: out of memory");
            memcpy(r->cores, nu->cores + lo, (size_t)r->ncores * sizeof *r->cores);
            j++;
        }
    }
    return FR_SUCCESS;
}

/* See hwtopo.h. One with an active port before one whose ports are all
 * down (it carries nothing), a fabric before plain IP, then by distance
 * from the GPU (or the NUMA node); equally near ones are shared out by @p ord. */
int fr_plan_nic(const fr_topo_t *t, int gpu, int numa, int ord)
{
    int best = -1, ntied = 0, *key = malloc((size_t)(t->nnics ? t->nnics : 1) * sizeof *key);
    if (!key || !t->nnics) { free(key); return -1; }
    for (int n = 0; n < t->nnics; n++) {
        const fr_topo_nic_t *c = &t->nic[n];
        int d = 4;
        if (gpu >= 0) d = fr_topo_gpu_nic_distance(t, gpu, n);
        else if (numa >= 0 && c->numa == numa) d = 2;
        else if (numa >= 0 && c->package >= 0 && c->package == t->numa[numa].package) d = 3;
        key[n] = !!c->down * 100 + !fr_nic_kind_fabric(c->kind) * 10 + d;
        if (best < 0 || key[n] < best) best = key[n];
    }
    for (int n = 0; n < t->nnics; n++) ntied += key[n] == best;
    int want = ord % ntied, nic = -1;
    for (int n = 0; n < t->nnics && nic < 0; n++)
        if (key[n] == best && want-- == 0) nic = n;
    free(key);
    return nic;
}

/* The (i mod n)-th of the n usable GPUs, -1 when there is none. */
static int nth_usable(const fr_topo_t *t, int i)
{
    int n = 0;
    for (int g = 0; g < t->ngpus; g++) n += fr_topo_gpu_usable(t, g);
    for (int g = 0, k = n ? i % n : -1; g < t->ngpus && k >= 0; g++)
        if (fr_topo_gpu_usable(t, g) && k-- == 0) return g;
    return -1;
}

fr_status_t fr_plan_make(const fr_topo_t *t, int nranks, int mode, const int *gpu_of_rank, fr_plan_t *out)
{
    memset(out, 0, sizeof *out);
    if (nranks < 1) return FR_ERROR(FR_ERR_INVALID_ARG, "binding plan: %d ranks", nranks);
    if (mode < FR_BIND_AUTO || mode > FR_BIND_GPU) return FR_ERROR(FR_ERR_INVALID_ARG, "binding plan: bad mode");
    /* auto, for a process the launcher left unbound: near the GPUs, and
     * left alone without one (what fr_topo_bind does, so the tool shows it) */
    if (mode == FR_BIND_AUTO) mode = nth_usable(t, 0) >= 0 ? FR_BIND_GPU : FR_BIND_NONE;
    out->mode = mode;
    out->nranks = nranks;
    out->rank = calloc((size_t)nranks, sizeof *out->rank);
    if (!out->rank) return FR_ERROR(FR_ERR_NO_MEMORY, "binding plan: out of memory");
    int rr = 0;
    for (int i = 0; i < nranks; i++) {
        fr_plan_rank_t *r = &out->rank[i];
        /* (a GPU the caller gives was usable in its rank's process, whose
         * CUDA devices may not be this one's: any GPU of the node counts) */
        r->gpu = gpu_of_rank ? gpu_of_rank[i] : nth_usable(t, i);
        if (r->gpu < 0 || r->gpu >= t->ngpus) r->gpu = -1;
        r->numa = mode == FR_BIND_NONE ? -1 : preferred_numa(t, mode, r->gpu, &rr);
    }
    fr_status_t st = FR_SUCCESS;
    if (mode != FR_BIND_NONE) {
        if (mode != FR_BIND_NUMA) spill(t, out);
        st = split_cores(t, out);
    }
    /* equally near NICs are dealt by the GPU's PCI order, the same in every
     * process (its place in t->gpu follows this process's CUDA indices) */
    for (int i = 0; i < nranks; i++)
        out->rank[i].nic = fr_plan_nic(t, out->rank[i].gpu, out->rank[i].numa,
                                       out->rank[i].gpu >= 0 ? t->gpu[out->rank[i].gpu].pci_order : i);
    if (st != FR_SUCCESS) fr_plan_free(out);
    return st;
}

void fr_plan_free(fr_plan_t *p)
{
    for (int i = 0; p->rank && i < p->nranks; i++) free(p->rank[i].cores);
    free(p->rank);
    memset(p, 0, sizeof *p);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

void fr_topo_ranges(const int *v, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && o < len; i++) {
        int j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1) j++;
        if (j > i) o += (size_t)snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", v[i], v[j]);
        else o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", v[i]);
        i = j;
    }
}

void fr_plan_cpulist(const fr_topo_t *t, const fr_plan_rank_t *r, char *buf, size_t len)
{
    int n = 0;
    for (int i = 0; i < r->ncores; i++) n += t->core[r->cores[i]].npus;
    int *pu = malloc((size_t)(n ? n : 1) * sizeof *pu);
    if (!pu) { snprintf(buf, len, "?"); return; }
    n = 0;
    for (int i = 0; i < r->ncores; i++)
        for (int j = 0; j < t->core[r->cores[i]].npus; j++) pu[n++] = t->core[r->cores[i]].pus[j];
    qsort(pu, (size_t)n, sizeof *pu, cmp_int);
    fr_topo_ranges(pu, n, buf, len);
    free(pu);
}
