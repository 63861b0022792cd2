/* The node's hardware as plain data (no hwloc types leak out of topology/):
 * packages, NUMA nodes, cores, GPUs and NICs with their place in the PCIe
 * tree; the binding plan of N local ranks; and applying it to this process. */
#ifndef FR_HWTOPO_H
#define FR_HWTOPO_H

#include <stdio.h>
#include <mpi.h>
#include "fastreduce.h"

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

typedef struct fr_topo_gpu {
    int  index;                  /* CUDA index (cudaN), else PCI order */
    char name[64], osdev[16];
    fr_topo_pci_t pci;
    int  numa, package;          /* -1 when the device's locality is the whole machine */
} fr_topo_gpu_t;

typedef enum { FR_NIC_IB = 0, FR_NIC_ROCE, FR_NIC_ETH } fr_nic_kind_t;

typedef struct fr_topo_nic {
    char name[32];               /* OpenFabrics device (mlx5_0) or interface (eth0) */
    char netdev[32];             /* its network interface, "" when none */
    int  kind, port;             /* fr_nic_kind_t; first port (1 by default) */
    fr_topo_pci_t pci;
    int  numa, package;
} fr_topo_nic_t;

typedef struct fr_topo {
    char  source[256];           /* "this machine" or the XML file's name */
    int   this_system;           /* binding may be applied */
    int   npackages, nnuma, ncores, npus;
    fr_topo_numa_t *numa;
    fr_topo_core_t *core;
    fr_topo_gpu_t  *gpu;
    int   ngpus;
    fr_topo_nic_t  *nic;
    int   nnics;
    int  *numa_dist;             /* [nnuma * nnuma]: hwloc's matrix, else 10 local / 20 remote */
    int   llc_level, nllc;       /* the last level of data caches (3: L3) and how many there are; 0: unknown */
    unsigned long long llc_bytes; /* the sizes of those caches added up */
    char  fingerprint[160];
} fr_topo_t;

/* Discover the node. @p xml names an hwloc XML file; NULL uses
 * FASTREDUCE_TOPO_XML, then HWLOC_XMLFILE, then this machine. */
fr_status_t fr_topo_load(const char *xml, fr_topo_t **out);
void fr_topo_free(fr_topo_t *t);

/* PCIe distance between GPU @p g and NIC @p n: 0 same PCIe switch, 1 same
 * host bridge, 2 same NUMA node, 3 same package, 4 farther (or unknown). */
int fr_topo_gpu_nic_distance(const fr_topo_t *t, int g, int n);
const char *fr_nic_kind_name(int kind);

/* ---- binding plan ------------------------------------------------------ */
typedef enum { FR_BIND_AUTO = 0, FR_BIND_NONE, FR_BIND_CORE, FR_BIND_NUMA, FR_BIND_GPU } fr_bind_mode_t;
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
 * into t->gpu, -1 for none); NULL means local rank i uses GPU i % ngpus.
 * AUTO plans as GPU when the node has GPUs and as CORE otherwise. */
fr_status_t fr_plan_make(const fr_topo_t *t, int nranks, int mode, const int *gpu_of_rank, fr_plan_t *out);
void fr_plan_free(fr_plan_t *p);
/* The OS indices of the PUs of @p r's cores as a list "0-3,16-19". */
void fr_plan_cpulist(const fr_topo_t *t, const fr_plan_rank_t *r, char *buf, size_t len);
/* A sorted list of integers written as ranges: "0-3,8,10-11". */
void fr_topo_ranges(const int *v, int n, char *buf, size_t len);

/* ---- printing (fastreduce-topo) ---------------------------------------- */
void fr_topo_print(FILE *f, const fr_topo_t *t);
void fr_topo_print_json(FILE *f, const fr_topo_t *t, const fr_plan_t *plan);
void fr_plan_print(FILE *f, const fr_topo_t *t, const fr_plan_t *plan);

/* ---- this process ------------------------------------------------------ */
typedef struct fr_binding {
    int  gpu;                    /* CUDA index of the rank's GPU, -1 when none */
    char nic[32];                /* the NIC chosen for the rank, "" when none */
    char cpus[256];              /* the affinity after fr_topo_bind, as a PU list */
    int  numa;
    char fingerprint[160];       /* the node's topology fingerprint, "" when unreadable */
    size_t llc_share;            /* the node's last-level cache bytes over its ranks here, 0 when unknown */
} fr_binding_t;

/* Collective over @p comm; works on the ranks that really share this
 * machine (MPI_COMM_TYPE_SHARED, whatever nodes are faked): discover it, plan by FASTREDUCE_BIND, bind this process,
 * point UCX_NET_DEVICES and NCCL_IB_HCA at its NIC unless already set, and
 * print the FASTREDUCE_REPORT_BINDINGS line. A topology that cannot be
 * read only costs the binding (a warning); the result is in @p out. */
fr_status_t fr_topo_bind(MPI_Comm comm, int rank, fr_binding_t *out);

#endif
