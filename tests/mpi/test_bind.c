/* Binding, checked for real on this machine: after fr_comm_create with
 * FASTREDUCE_BIND=core|numa|none each rank's affinity (sched_getaffinity)
 * is what the documented plan gives, worked out here from /sys alone:
 * local rank l goes to NUMA node l % N (of the N NUMA nodes holding CPUs
 * it may use); the k ranks of one NUMA node split its c cores in rank
 * order (rank j of them: cores [j*c/k, (j+1)*c/k)), or take core j % c each
 * when k > c; numa binds to the whole node; none keeps the affinity; gpu
 * (without GPUs, as here) is core; a topology from FASTREDUCE_TOPO_XML is
 * planned but never applied. With --split-first the process's first
 * communicator holds half of the node's ranks (odd or even): it must bind
 * nothing, and the world's communicator after it binds as above. */
#define _GNU_SOURCE
#include <sched.h>
#include "testutil.h"

#define MAXCPU 1024

/* Parse a /sys list "0-3,8" into @p set; 0 when the file cannot be read. */
static int read_list(const char *path, cpu_set_t *set)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    if (!f) return 0;
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    CPU_ZERO(set);
    for (char *s = NULL, *tok = ok ? strtok_r(buf, ",\n", &s) : NULL; tok; tok = strtok_r(NULL, ",\n", &s)) {
        int lo, hi;
        if (sscanf(tok, "%d-%d", &lo, &hi) != 2) hi = lo = atoi(tok);
        for (int c = lo; c <= hi && c < MAXCPU; c++) CPU_SET(c, set);
    }
    return ok;
}

/* A core: the CPUs sharing (package, core_id), named by its lowest CPU. */
static int core_of(int cpu)
{
    char p[128];
    cpu_set_t sib;
    snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
    if (!read_list(p, &sib)) return cpu;
    for (int c = 0; c < MAXCPU; c++) if (CPU_ISSET(c, &sib)) return c;
    return cpu;
}

/* The expected affinity of local rank @p l of @p nl under @p mode. */
static void expected(const char *mode, int l, int nl, const cpu_set_t *start, cpu_set_t *want)
{
    cpu_set_t node[64];
    int nn = 0;
    for (int i = 0; i < 64 && nn < 64; i++) {
        char p[128];
        cpu_set_t s;
        snprintf(p, sizeof p, "/sys/devices/system/node/node%d/cpulist", i);
        if (!read_list(p, &s)) continue;
        CPU_AND(&s, &s, start);
        if (CPU_COUNT(&s)) node[nn++] = s;
    }
    if (!nn) { node[0] = *start; nn = 1; }   /* no NUMA information: one node */
    const cpu_set_t *mine = &node[l % nn];
    CPU_ZERO(want);
    if (!strcmp(mode, "numa")) { *want = *mine; return; }
    int cores[MAXCPU], c = 0;                 /* the node's cores, by lowest CPU */
    for (int cpu = 0; cpu < MAXCPU; cpu++)
        if (CPU_ISSET(cpu, mine) && core_of(cpu) == cpu) cores[c++] = cpu;
    int k = 0, j = 0;
    for (int r = 0; r < nl; r++) {
        if (r % nn != l % nn) continue;
        if (r < l) j++;
        k++;
    }
    int lo = k <= c ? j * c / k : j % c, hi = k <= c ? (j + 1) * c / k : lo + 1;
    for (int cpu = 0; cpu < MAXCPU; cpu++)
        if (CPU_ISSET(cpu, mine))
            for (int i = lo; i < hi; i++) if (core_of(cpu) == cores[i]) CPU_SET(cpu, want);
}

static void list(const cpu_set_t *s, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int c = 0; c < MAXCPU && o < len; c++)
        if (CPU_ISSET(c, s)) o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", c);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_bind");
    const char *mode = getenv("FASTREDUCE_BIND");
    if (!mode) mode = "none";
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int l, nl;
    MPI_Comm_rank(node, &l);
    MPI_Comm_size(node, &nl);
    cpu_set_t start, after, want;
    sched_getaffinity(0, sizeof start, &start);
    fr_status_t st;

    if (argc > 1 && !strcmp(argv[1], "--split-first")) {
        /* planned over its own ranks only, a half would give a rank of each
         * half the same cores */
        tu_begin("a first communicator over half of the node binds nothing");
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, tu.rank % 2, tu.rank, &half);
        fr_comm_t part = NULL;
        st = fr_comm_create(half, NULL, &part);
        sched_getaffinity(0, sizeof after, &after);
        char a[512], s[512];
        list(&after, a, sizeof a);
        list(&start, s, sizeof s);
        TU_CHECK(st == FR_SUCCESS && CPU_EQUAL(&after, &start), "fr_comm_create: %s; cpus %s, were %s",
                 tu_status(st), a, s);
        if (part) fr_comm_destroy(part);
        MPI_Comm_free(&half);
    }

    tu_begin("fr_comm_create with FASTREDUCE_BIND=%s", mode);
    fr_comm_t comm = NULL;
    st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    TU_CHECK(st == FR_SUCCESS, "fr_comm_create: %s", tu_status(st));

    tu_begin("affinity of local rank %d of %d after FASTREDUCE_BIND=%s", l, nl, mode);
    sched_getaffinity(0, sizeof after, &after);
    const char *xml = getenv("FASTREDUCE_TOPO_XML");
    /* no GPU here: auto binds nothing and gpu binds as core; a topology read
     * from an XML file is another machine's, so it is never applied */
    if (!strcmp(mode, "none") || !strcmp(mode, "auto") || (xml && *xml)) want = start;
    else expected(!strcmp(mode, "gpu") ? "core" : mode, l, nl, &start, &want);
    char a[512], w[512];
    list(&after, a, sizeof a);
    list(&want, w, sizeof w);
    TU_CHECK(CPU_EQUAL(&after, &want), "bound to cpus %s, the plan says %s", a, w);

    if (xml && *xml) {
        tu_begin("a topology from %s sets no UCX_NET_DEVICES or NCCL_IB_HCA", xml);
        TU_CHECK(!getenv("UCX_NET_DEVICES") && !getenv("NCCL_IB_HCA"), "UCX_NET_DEVICES=%s NCCL_IB_HCA=%s",
                 getenv("UCX_NET_DEVICES") ? getenv("UCX_NET_DEVICES") : "(unset)",
                 getenv("NCCL_IB_HCA") ? getenv("NCCL_IB_HCA") : "(unset)");
    }

    /* The binding holds: a collective still works from the bound cores. */
    tu_begin("allreduce after binding");
    int64_t x = tu.rank + 1, y = 0;
    st = fr_allreduce(&x, &y, 1, FR_INT64, FR_SUM, comm);
    TU_CHECK(st == FR_SUCCESS && y == (int64_t)tu.size * (tu.size + 1) / 2, "allreduce: %s, sum %lld",
             tu_status(st), (long long)y);
    /* A later communicator over a part of the ranks (as an MPI program's
     * split, through the interposer) keeps the first one's binding. */
    tu_begin("a second communicator, on a split, keeps the binding");
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, tu.rank % 2, tu.rank, &half);
    fr_comm_t second = NULL;
    st = fr_comm_create(half, NULL, &second);
    cpu_set_t again;
    sched_getaffinity(0, sizeof again, &again);
    TU_CHECK(st == FR_SUCCESS && CPU_EQUAL(&again, &after), "fr_comm_create: %s; affinity %s", tu_status(st),
             CPU_EQUAL(&again, &after) ? "unchanged" : "CHANGED");
    if (second) fr_comm_destroy(second);
    MPI_Comm_free(&half);
    fr_comm_destroy(comm);
    MPI_Comm_free(&node);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
