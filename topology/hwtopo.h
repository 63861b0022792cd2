/* The node's hardware as plain data (no hwloc types leak out of topology/):
 * packages, NUMA nodes, cores, GPUs and NICs with their place in the PCIe
 * tree; the binding plan of N local ranks; and applying it to this process. */
#ifndef FR_HWTOPO_H
#define FR_HWTOPO_H

#include <stdio.h>
#include <mpi.h>
#include "fastreduce.h"
#include "settings.h"   /* fr_bind_mode_t */

/* Where a PCI device sits: ids of its host bridge and of the PCIe switch
 * (the topmost PCI-to-PCI bridge under that host bridge), -1 when none. */
typedef struct fr_topo_pci {
    char     busid[16];          /* "0000:18:00.0", "" when not on PCI */
    unsigned vendor, device, cls;
    long     host_bridge, sw;
} fr_topo_pci_t;

typedef struct fr_topo_numa {
    int      os_index, package;
    unsigned long long mem;      /* bytes */
    int     *cores, ncores;      /* logical core indices */
} fr_topo_numa_t;

typedef struct fr_topo_core {
    int  numa, package;
    int *pus, npus;              /* OS indices of the core's PUs */
} fr_topo_core_t;

/* A GPU's index is unique on the node: its CUDA index where hwloc shows a
 * CUDA device for it, else counted on in PCI bus order past the highest
 * CUDA index (discover.c, docs/architecture.md). */
typedef struct fr_topo_gpu {
    int  index;                  /* unique on the node; equal to cuda when cuda >= 0 */
    int  cuda;                   /* this process's CUDA index (hwloc's cudaN), -1 when none */
    int  pci_order;              /* place among the node's GPUs in PCI bus order */
    char name[64], osdev[16];
    fr_topo_pci_t pci;
    int  numa, package;          /* -1 when the device's locality is the whole machine */
} fr_topo_gpu_t;

/* What a NIC carries, read from hwloc's OS devices (nic.c says how): the
 * first four have a verbs device, the first six are fabrics preferred over
 * plain IP. The order is the fingerprint's. */
typedef enum {
    FR_NIC_IB = 0, FR_NIC_ROCE, FR_NIC_OPA, FR_NIC_RDMA, FR_NIC_SLINGSHOT, FR_NIC_BXI, FR_NIC_IPOIB, FR_NIC_ETH,
    FR_NIC_NKINDS
} fr_nic_kind_t;

/* One NIC a PCI function (or an OS device without one): an HCA and all
 * its ports and network interfaces count once. */
typedef struct fr_topo_nic {
    char name[32];               /* OpenFabrics device (mlx5_0) or interface (eth0) */
    char netdev[64];             /* its network interfaces, comma-separated, "" when none */
    int  kind, port, nports;     /* fr_nic_kind_t; the port to use (the first active one), ports seen */
    int  down;                   /* 1 when hwloc gives its ports' states and none is active */
    fr_topo_pci_t pci;
    int  numa, package;
} fr_topo_nic_t;

typedef struct fr_topo {
    char  source[256];           /* "this machine" or the XML file's name */
    int   this_system;           /* binding may be applied */
    int   npackages, nnuma, ncores, npus;
    fr_topo_numa_t *numa;
    fr_topo_core_t *core;
    fr_topo_gpu_t  *gpu;         /* sorted by index */
    int   ngpus, ncuda;          /* GPUs, and those of them with a CUDA index */
    fr_topo_nic_t  *nic;
    int   nnics;
    int  *numa_dist;             /* [nnuma * nnuma]: hwloc's matrix, else 10 local / 20 remote */
    int   llc_level, nllc;       /* the last level of data caches (3: L3) and how many there are; 0: unknown */
    unsigned long long llc_bytes; /* the sizes of those caches added up */
    char  fingerprint[160];
} fr_topo_t;

/* Discover the node. @p xml names an hwloc XML file; NULL: this machine. */
fr_status_t fr_topo_load(const char *xml, fr_topo_t **out);
/* The XML file the settings name: FASTREDUCE_TOPO_XML (@p set's topo_xml),
 * else HWLOC_XMLFILE when not empty; NULL for this machine. */
const char *fr_topo_xml_of(const fr_settings_t *set);
void fr_topo_free(fr_topo_t *t);
/* A copy of @p t with only the PUs p where p < @p nkeep and keep[p]: each
 * core keeps those of its PUs and a core left without one is dropped (the
 * cores are numbered anew); NUMA nodes, GPUs, NICs and the fingerprint
 * stay as discovered. An error when no core is left. */
fr_status_t fr_topo_restrict(const fr_topo_t *t, const unsigned char *keep, int nkeep, fr_topo_t **out);

/* PCIe distance between GPU @p g and NIC @p n: 0 same PCIe switch, 1 same
 * host bridge, 2 same NUMA node, 3 same package, 4 farther (or unknown). */
int fr_topo_gpu_nic_distance(const fr_topo_t *t, int g, int n);
const char *fr_nic_kind_name(int kind);
/* Whether UCX and NCCL can be pointed at a NIC of @p kind (a verbs device). */
int fr_nic_kind_verbs(int kind);
/* Whether @p kind is a fabric, preferred over plain IP for collectives. */
int fr_nic_kind_fabric(int kind);
/* Whether GPU @p g can be given to a rank: every GPU where hwloc shows no
 * CUDA device at all, else only those with a CUDA index. */
int fr_topo_gpu_usable(const fr_topo_t *t, int g);

/* ---- binding plan ------------------------------------------------------ */
/* Parse "auto|none|core|numa|gpu"; -1 when malformed. */
int fr_bind_mode_parse(const char *s);
const char *fr_bind_mode_name(int mode);

typedef struct fr_plan_rank {
    int  numa;                   /* NUMA node index, -1 when not bound */
    int *cores, ncores;          /* logical cores it is bound to (none when not bound) */
    int  shared;                 /* 1 when some core is shared with another rank */
    int  gpu;                    /* index into fr_topo_t.gpu, -1 when none */
    int  nic;                    /* index into fr_topo_t.nic, -1 when none */
} fr_plan_rank_t;

typedef struct fr_plan {
    int mode;                    /* the mode planned (never AUTO) */
    int nranks;
    fr_plan_rank_t *rank;
} fr_plan_t;

/* Plan @p nranks local ranks. @p gpu_of_rank gives each rank's GPU (index
 * into t->gpu, -1 for none; any GPU of the node, as each rank chose it in
 * its own process); NULL means local rank i uses the (i mod n)-th of the n
 * usable GPUs (fr_topo_gpu_usable).
 * AUTO plans as GPU when the node has usable GPUs and as NONE otherwise,
 * as fr_topo_bind does for a process the launcher left unbound. */
fr_status_t fr_plan_make(const fr_topo_t *t, int nranks, int mode, const int *gpu_of_rank, fr_plan_t *out);
void fr_plan_free(fr_plan_t *p);
/* The NIC nearest GPU @p gpu (index into t->gpu), else NUMA node @p numa
 * (-1 for neither), as fr_plan_make picks a rank's; equally near ones are
 * dealt by @p ord. -1 when the node has none. */
int fr_plan_nic(const fr_topo_t *t, int gpu, int numa, int ord);
/* The OS indices of the PUs of @p r's cores as a list "0-3,16-19". */
void fr_plan_cpulist(const fr_topo_t *t, const fr_plan_rank_t *r, char *buf, size_t len);
/* A sorted list of integers written as ranges: "0-3,8,10-11". */
void fr_topo_ranges(const int *v, int n, char *buf, size_t len);

/* ---- printing (fastreduce-topo) ---------------------------------------- */
void fr_topo_print(FILE *f, const fr_topo_t *t);
void fr_topo_print_json(FILE *f, const fr_topo_t *t, const fr_plan_t *plan);
/* How the launcher lines name the job's nodes: @p hosts (NULL-terminated)
 * or @p nnodes placeholders NODE0..; @p rankfile, when set, is the file the
 * Open MPI line reads (the caller writes it with fr_rankfile_write). */
typedef struct fr_launch {
    int          nnodes;         /* nodes in the job; 0 counts as 1 */
    char *const *hosts;          /* host names, NULL for NODE0.. */
    const char  *rankfile;       /* file name for Open MPI's --rankfile, NULL for none */
} fr_launch_t;
/* The plan as a table, then the launcher lines (@p launch may be NULL). */
void fr_plan_print(FILE *f, const fr_topo_t *t, const fr_plan_t *plan, const fr_launch_t *launch);
void fr_launch_print(FILE *f, const fr_topo_t *t, const fr_plan_t *plan, const fr_launch_t *launch);
/* Open MPI 4.1's rankfile for the whole job: "rank R=HOST slot=CORES" for
 * every rank of every node, each line prefixed by @p indent. */
void fr_rankfile_write(FILE *f, const fr_plan_t *plan, const fr_launch_t *launch, const char *indent);
int fr_launch_nodes(const fr_launch_t *launch);

/* ---- this process ------------------------------------------------------ */
typedef struct fr_binding {
    int  gpu;                    /* this process's CUDA index of the rank's GPU, -1 when none */
    char nic[32];                /* the NIC chosen for the rank, "" when none */
    char cpus[256];              /* the affinity after fr_topo_bind, as a PU list */
    int  numa;
    char fingerprint[160];       /* the node's topology fingerprint, "" when unreadable */
    size_t llc_share;            /* the node's last-level cache bytes over its ranks here, 0 when unknown */
} fr_binding_t;

/* Collective over @p comm; works on the ranks that really share this
 * machine (MPI_COMM_TYPE_SHARED, whatever nodes are faked): discover it, plan by @p set's
 * FASTREDUCE_BIND, bind this process,
 * point UCX_NET_DEVICES and NCCL_IB_HCA at its NIC unless already set, and
 * print the FASTREDUCE_REPORT_BINDINGS line. A topology that cannot be
 * read only costs the binding (a warning); the result is in @p out. */
fr_status_t fr_topo_bind(MPI_Comm comm, int rank, const fr_settings_t *set, fr_binding_t *out);

#endif
