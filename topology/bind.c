/* Applying the plan to this process at fr_comm_create: its GPU, its cores,
 * the NIC UCX and NCCL are told to use, and the FASTREDUCE_REPORT_BINDINGS
 * line. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
#include "hwtopo.h"
#include "topology.h"
#include "log.h"
#include "settings.h"

/* This process's affinity as a PU list. */
static void affinity(char *buf, size_t len)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) { snprintf(buf, len, "?"); return; }
    int v[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &set)) v[n++] = c;
    fr_topo_ranges(v, n, buf, len);
}

/* Whether nobody bound a process that started on @p cpus: they hold every
 * CPU of @p t, hwloc's topology of this machine, which lists the CPUs the
 * machine allows the job (a container's or cgroup's limit is no binding).
 * For another machine's topology, or none: every online CPU. */
static int unbound_on(const fr_topo_t *t, const cpu_set_t *cpus)
{
    if (t && t->this_system) {
        for (int c = 0; c < t->ncores; c++)
            for (int j = 0; j < t->core[c].npus; j++)
                if (t->core[c].pus[j] < CPU_SETSIZE && !CPU_ISSET(t->core[c].pus[j], cpus)) return 0;
        return 1;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online <= 0 || CPU_COUNT(cpus) >= online;
}

/* The NUMA node every CPU of @p cpus that @p t lists lies in; -1 when they
 * lie in several, or in none. */
static int numa_of(const fr_topo_t *t, const cpu_set_t *cpus)
{
    int numa = -1;
    for (int c = 0; c < t->ncores; c++)
        for (int j = 0; j < t->core[c].npus; j++) {
            int p = t->core[c].pus[j];
            if (p >= CPU_SETSIZE || !CPU_ISSET(p, cpus)) continue;
            if (numa >= 0 && t->core[c].numa != numa) return -1;
            numa = t->core[c].numa;
        }
    return numa;
}

static fr_status_t set_affinity(const fr_topo_t *t, const fr_plan_rank_t *r)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < r->ncores; i++)
        for (int j = 0; j < t->core[r->cores[i]].npus; j++)
            if (t->core[r->cores[i]].pus[j] < CPU_SETSIZE) CPU_SET(t->core[r->cores[i]].pus[j], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return FR_ERROR(FR_ERR_SYSTEM, "binding: sched_setaffinity failed");
    return FR_SUCCESS;
}

/* CUDA_VISIBLE_DEVICES as a list of indices into @p ids; 0 when unset or
 * not such a list (UUIDs, MIG names), which leaves CUDA's own order. */
static int visible_list(int *ids, int max)
{
    const char *vis = fr_foreign_get(FR_F_CUDA_VISIBLE_DEVICES);
    if (!vis || !*vis) return 0;
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", vis);
    for (char *s = NULL, *tok = strtok_r(buf, ",", &s); tok && n < max; tok = strtok_r(NULL, ",", &s)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || end == tok || v < 0 || v > 65535) {
            FR_INFO(FR_SUB_TOPO, "CUDA_VISIBLE_DEVICES='%s' is not a list of indices; GPUs in PCI order", vis);
            return 0;
        }
        ids[n++] = (int)v;
    }
    return n;
}

/* The GPU (index into t->gpu) this rank uses, and its CUDA index in this
 * process (@p cuda). Where hwloc shows CUDA devices they are this process's
 * already (CUDA_VISIBLE_DEVICES applied): local rank i takes the (i mod n)-th.
 * Without them GPUs are known by PCI order, which CUDA_VISIBLE_DEVICES
 * names (as CUDA_DEVICE_ORDER=PCI_BUS_ID does); the rank's CUDA index is
 * then its place in that list. */
static int my_gpu(const fr_topo_t *t, int local, int *cuda)
{
    *cuda = -1;
    if (!t || !t->ngpus) return -1;
    int usable[64], n = 0;
    for (int g = 0; g < t->ngpus && n < 64; g++)
        if (fr_topo_gpu_usable(t, g)) usable[n++] = g;
    if (!n) return -1;
    int ids[64], nvis = t->ncuda ? 0 : visible_list(ids, 64);
    if (!nvis) {
        int g = usable[local % n];
        *cuda = t->ncuda ? t->gpu[g].cuda : t->gpu[g].pci_order;
        return g;
    }
    for (int g = 0; g < t->ngpus; g++)
        if (t->gpu[g].pci_order == ids[local % nvis]) {
            *cuda = local % nvis;
            return g;
        }
    FR_INFO(FR_SUB_TOPO, "CUDA_VISIBLE_DEVICES names GPU %d, which the topology does not have; no GPU",
            ids[local % nvis]);
    return -1;
}

/* The GPU (index into t->gpu) whose PCI bus id is @p busid, -1 for none. */
static int gpu_by_busid(const fr_topo_t *t, const char *busid)
{
    for (int g = 0; t && busid[0] && g < t->ngpus; g++)
        if (!strcmp(t->gpu[g].pci.busid, busid)) return g;
    return -1;
}

/* Point UCX and NCCL at the rank's RDMA NIC, unless the user chose; not
 * at one whose ports are all down (given only when every NIC's are),
 * which would leave them no device: they choose for themselves. */
static void nic_env(const fr_topo_nic_t *n)
{
    if (!fr_nic_kind_verbs(n->kind) || n->down) return;
    char v[64];
    snprintf(v, sizeof v, "%s:%d", n->name, n->port);
    fr_foreign_offer(FR_F_UCX_NET_DEVICES, v);
    snprintf(v, sizeof v, "=%s:%d", n->name, n->port);
    fr_foreign_offer(FR_F_NCCL_IB_HCA, v);
}

/* The machine's topology, discovered at the process's first communicator
 * and kept for the process (discovery is most of what binding costs, and a
 * program under the interposer makes a communicator per MPI communicator);
 * freed when the library is unloaded. A topology from an XML file
 * (FASTREDUCE_TOPO_XML, HWLOC_XMLFILE) is read for each communicator. */
static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static fr_topo_t *machine;
static int bound;   /* this process's affinity was set, by a communicator holding its node */

__attribute__((destructor)) static void topo_unload(void)
{
    pthread_mutex_lock(&topo_lock);
    fr_topo_free(machine);
    machine = NULL;
    pthread_mutex_unlock(&topo_lock);
}

/* The machine's topology (*held: 1, kept for the process) or an XML file's
 * (*held: 0, the caller frees it). */
static fr_status_t topo_get(const fr_settings_t *set, fr_topo_t **t, int *held)
{
    *held = 0;
    if (fr_topo_xml_of(set)) return fr_topo_load(fr_topo_xml_of(set), t);
    fr_status_t st = FR_SUCCESS;
    pthread_mutex_lock(&topo_lock);
    if (!machine) st = fr_topo_load(NULL, &machine);
    *held = machine != NULL;
    *t = machine;
    pthread_mutex_unlock(&topo_lock);
    return st;
}

/* The affinity this process had before any communicator bound it (read
 * at its first), so that every communicator plans over the same CPUs. An
 * affinity that cannot be read is every CPU. */
static void started_affinity(cpu_set_t *set)
{
    static cpu_set_t first;
    static int read;
    pthread_mutex_lock(&topo_lock);
    if (!read && sched_getaffinity(0, sizeof first, &first) != 0) memset(&first, 0xff, sizeof first);
    read = 1;
    *set = first;
    pthread_mutex_unlock(&topo_lock);
}

/* What each rank tells the node's others before they plan. */
typedef struct rank_info {
    int  launched;               /* its local rank as the launcher says, -1 when it does not */
    int  whole;                  /* the communicator holds every process MPI_COMM_WORLD has here */
    int  unbound;                /* nobody bound it before it started (unbound_on) */
    char busid[sizeof ((fr_topo_pci_t *)0)->busid];   /* its GPU's PCI bus id, "" for none */
    cpu_set_t cpus;              /* the CPUs it started with */
} rank_info_t;

/* Whether @p comm holds every process MPI_COMM_WORLD has on this node, from
 * local facts only (a collective over the world, made from a communicator
 * of some of its processes, would wait forever): all of the world's
 * processes, or as many here (@p nlocal) as the launcher started. */
static int holds_node(MPI_Comm comm, int nlocal, int launched)
{
    int cmp = MPI_UNEQUAL;
    if (PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp) == MPI_SUCCESS && cmp != MPI_UNEQUAL) return 1;
    return launched > 0 && nlocal == launched;
}

/* Each rank's place in the node's plan: the launcher's local ranks where
 * they number the ranks 0..n-1, so that a rank keeps its place (and the
 * GPU a CUDA_VISIBLE_DEVICES=$LOCAL_RANK wrapper gave it) whatever the
 * communicator; else the node communicator's order. Every rank works it
 * out from the same gathered facts. */
static void places(const rank_info_t *info, int n, int *place)
{
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        ok = info[i].launched >= 0 && info[i].launched < n;
        for (int j = 0; j < i && ok; j++) ok = info[j].launched != info[i].launched;
    }
    for (int i = 0; i < n; i++) place[i] = ok ? info[i].launched : i;
}

/* What the node's ranks plan with, alike on every rank. */
typedef struct node_facts {
    int      local;              /* this rank's place */
    int      whole;              /* every rank's communicator holds the node */
    int      unbound;            /* no rank of the node was bound by its launcher */
    int     *gpus;               /* [place]: the rank's GPU, index into this process's t->gpu, -1 for none */
    cpu_set_t cpus;              /* the CPUs some rank started with */
    int      numa;               /* the NUMA node this rank started in, -1 when its CPUs span several */
    int      numa_ord;           /* its place among the ranks that started there */
} node_facts_t;

/* Gather every rank's @p mine over @p node_comm (collective) into @p f, so
 * that every rank plans the whole node alike. A GPU travels by PCI bus id:
 * a place in t->gpu or a CUDA index means something in its own process
 * only (with CUDA_VISIBLE_DEVICES per rank, each rank's GPU is its cuda0). */
static fr_status_t gather(MPI_Comm node_comm, const fr_topo_t *t, const rank_info_t *mine, int me, int nlocal,
                          node_facts_t *f)
{
    rank_info_t *info = malloc((size_t)nlocal * sizeof *info);
    int *place = malloc((size_t)nlocal * sizeof *place);
    f->gpus = malloc((size_t)nlocal * sizeof *f->gpus);
    int rc = !info || !place || !f->gpus
                 ? MPI_ERR_NO_MEM
                 : PMPI_Allgather(mine, (int)sizeof *mine, MPI_BYTE, info, (int)sizeof *mine, MPI_BYTE, node_comm);
    f->whole = f->unbound = 1;
    f->local = me;
    f->numa = -1;
    f->numa_ord = 0;
    CPU_ZERO(&f->cpus);
    if (rc == MPI_SUCCESS) {
        places(info, nlocal, place);
        for (int i = 0; i < nlocal; i++) {
            f->gpus[place[i]] = gpu_by_busid(t, info[i].busid);
            f->whole &= info[i].whole;
            f->unbound &= info[i].unbound;
            CPU_OR(&f->cpus, &f->cpus, &info[i].cpus);
        }
        f->local = place[me];
        /* (NICs equally near a NUMA node are dealt among the ranks that run there) */
        f->numa = t ? numa_of(t, &mine->cpus) : -1;
        for (int i = 0; i < nlocal && f->numa >= 0; i++)
            f->numa_ord += place[i] < place[me] && numa_of(t, &info[i].cpus) == f->numa;
    }
    free(info);
    free(place);
    if (rc == MPI_SUCCESS) return FR_SUCCESS;
    return rc == MPI_ERR_NO_MEM ? FR_ERROR(FR_ERR_NO_MEMORY, "binding: out of memory")
                                : FR_ERROR(FR_ERR_MPI, "binding: MPI_Allgather failed");
}

/* @p t cut to the CPUs some rank of the node started with (@p cpus): hwloc
 * lists every CPU the machine allows the job, whatever a taskset or the
 * launcher left the processes, and a plan must hand out none other. @p t
 * itself when nothing is cut or it is another machine's (an XML file). */
static fr_topo_t *within(fr_topo_t *t, const cpu_set_t *cpus)
{
    if (!t || !t->this_system) return t;
    int top = 0, cut = 0;
    for (int c = 0; c < t->ncores; c++)
        for (int j = 0; j < t->core[c].npus; j++) top = t->core[c].pus[j] > top ? t->core[c].pus[j] : top;
    unsigned char *keep = calloc((size_t)top + 1, 1);
    if (!keep) return t;
    for (int c = 0; c < t->ncores; c++)
        for (int j = 0; j < t->core[c].npus; j++) {
            int p = t->core[c].pus[j];   /* (one past cpu_set_t is never bound: kept) */
            keep[p] = p >= CPU_SETSIZE || CPU_ISSET(p, cpus);
            cut += !keep[p];
        }
    fr_topo_t *r = NULL;
    if (cut && fr_topo_restrict(t, keep, top + 1, &r) != FR_SUCCESS)
        FR_WARN(FR_SUB_TOPO, "binding over all of the machine's CPUs: %s", fr_last_error());
    free(keep);
    return r ? r : t;
}

static fr_status_t bind_node(MPI_Comm comm, MPI_Comm node_comm, int rank, const fr_settings_t *set,
                             fr_binding_t *out)
{
    int me = 0, nlocal = 1, world = 1, launched = -1, mode = set->bind;
    PMPI_Comm_rank(node_comm, &me);
    PMPI_Comm_size(node_comm, &nlocal);
    PMPI_Comm_size(MPI_COMM_WORLD, &world);
    int lrank = fr_launcher_local(world, &launched);
    char before[256];
    affinity(before, sizeof before);

    fr_topo_t *t = NULL;
    int held = 0;
    if (topo_get(set, &t, &held) != FR_SUCCESS)
        FR_WARN(FR_SUB_TOPO, "cannot read the topology (%s); no binding", fr_last_error());
    if (t) snprintf(out->fingerprint, sizeof out->fingerprint, "%s", t->fingerprint);
    if (t) out->llc_share = (size_t)(t->llc_bytes / (unsigned long long)nlocal);
    int cuda;
    int g = my_gpu(t, lrank >= 0 ? lrank : me, &cuda);
    rank_info_t mine = {lrank, holds_node(comm, nlocal, launched), 1, "", {{0}}};
    if (g >= 0) snprintf(mine.busid, sizeof mine.busid, "%s", t->gpu[g].pci.busid);
    started_affinity(&mine.cpus);
    mine.unbound = unbound_on(t, &mine.cpus);
    node_facts_t f;
    fr_status_t st = gather(node_comm, t, &mine, me, nlocal, &f);
    /* plan over the node's CPUs (drop the cut copy, and an XML topology,
     * when done; the machine's stays with the process) */
    fr_topo_t *pt = st == FR_SUCCESS ? within(t, &f.cpus) : t;
#define TOPO_DONE() do { if (pt != t) fr_topo_free(pt); if (!held) fr_topo_free(t); } while (0)
    if (st != FR_SUCCESS) {
        free(f.gpus);
        TOPO_DONE();
        return st;
    }
    int local = f.local, *gpus = f.gpus, whole = f.whole, unbound = f.unbound;
    /* auto: keep a launcher's binding (of any rank of the node: the others'
     * plan must not take its cores); else bind near the GPUs if any */
    int eff = mode;
    if (mode == FR_BIND_AUTO) eff = !unbound || !t || !t->ngpus ? FR_BIND_NONE : FR_BIND_GPU;
    fr_plan_t plan = {0};
    const char *why = "";
    char planned[384];
    if (t && fr_plan_make(pt, nlocal, eff, gpus, &plan) == FR_SUCCESS) {
        const fr_plan_rank_t *r = &plan.rank[local];
        if (r->gpu >= 0) out->gpu = cuda;   /* (r->gpu is this rank's own g) */
        /* Not bound by the plan and without a GPU: the NIC nearest the NUMA
         * node the rank started in (the launcher's binding), where its CPUs
         * lie in one. */
        int nic = eff == FR_BIND_NONE && r->gpu < 0 && f.numa >= 0 ? fr_plan_nic(pt, -1, f.numa, f.numa_ord) : r->nic;
        if (nic >= 0) {
            snprintf(out->nic, sizeof out->nic, "%s", t->nic[nic].name);
            if (t->this_system) nic_env(&t->nic[nic]);   /* never a device of another machine */
        }
        out->numa = r->numa;
        if (eff != FR_BIND_NONE && !t->this_system) {
            /* (the CPUs it would have: the report shows another machine's plan) */
            char cpus[256];
            fr_plan_cpulist(pt, r, cpus, sizeof cpus);
            snprintf(planned, sizeof planned, " (not bound: the topology is an XML file, not this machine; "
                     "planned cpus %s)", cpus);
            why = planned;
            FR_WARN(FR_SUB_TOPO, "FASTREDUCE_BIND=%s ignored: topology %s is not this machine",
                    fr_bind_mode_name(eff), t->source);
        } else if (eff != FR_BIND_NONE && __atomic_load_n(&bound, __ATOMIC_RELAXED)) {
            /* a later communicator (a split, a dup) keeps the binding made */
            why = " (kept: bound at an earlier communicator)";
        } else if (eff != FR_BIND_NONE && !whole) {
            /* the node's other ranks plan without these: binding now could
             * give two ranks one core; a communicator holding them all binds */
            why = " (not bound: the communicator holds part of this node's processes)";
        } else if (eff != FR_BIND_NONE && set_affinity(pt, r) != FR_SUCCESS) {
            why = " (binding failed)";
            FR_WARN(FR_SUB_TOPO, "%s", fr_last_error());
        } else if (eff != FR_BIND_NONE) {
            __atomic_store_n(&bound, 1, __ATOMIC_RELAXED);
        }
        if (mode == FR_BIND_AUTO && !unbound) why = " (kept the launcher's binding)";
    } else if (t) {
        FR_WARN(FR_SUB_TOPO, "no binding plan: %s", fr_last_error());
    }
    affinity(out->cpus, sizeof out->cpus);
    if (set->report_bindings > 0) {
        char host[64] = "?";
        gethostname(host, sizeof host);
        host[sizeof host - 1] = '\0';
        char gpu[16] = "none", numa[16] = "-";
        if (out->gpu >= 0) snprintf(gpu, sizeof gpu, "%d", out->gpu);
        if (out->numa >= 0) snprintf(numa, sizeof numa, "%d", out->numa);
        fr_log_report("BIND", "host %s rank %d local %d/%d bind %s: cpus %s numa %s gpu %s nic %s%s", host, rank,
                      local, nlocal, fr_bind_mode_name(eff), out->cpus, numa, gpu, out->nic[0] ? out->nic : "none",
                      why);
    }
    FR_INFO(FR_SUB_TOPO, "bind %s: cpus %s (were %s), gpu %d, nic %s%s", fr_bind_mode_name(eff), out->cpus, before,
            out->gpu, out->nic[0] ? out->nic : "none", why);
    fr_plan_free(&plan);
    free(gpus);
    TOPO_DONE();
#undef TOPO_DONE
    return FR_SUCCESS;
}

fr_status_t fr_topo_bind(MPI_Comm comm, int rank, const fr_settings_t *set, fr_binding_t *out)
{
    memset(out, 0, sizeof *out);
    out->gpu = out->numa = -1;
    /* The real node, even when nodes are faked: binding is about the machine. */
    MPI_Comm node_comm;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "binding: MPI_Comm_split_type failed");
    fr_status_t st = bind_node(comm, node_comm, rank, set, out);
    PMPI_Comm_free(&node_comm);
    return st;
}
