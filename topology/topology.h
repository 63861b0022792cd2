/* Node grouping: which ranks share a node. The only part of the project
 * allowed to include hwloc is topology/. */
#ifndef FR_TOPOLOGY_H
#define FR_TOPOLOGY_H

#include <mpi.h>
#include "fastreduce.h"

typedef struct fr_nodeinfo {
    int      node, nnodes;          /* this rank's node index; number of nodes */
    int      local_rank, local_size;
    int      ppn;                   /* largest local_size over the nodes */
    int     *rank_node;             /* [size] node index per rank (malloc'd) */
    int     *rank_local;            /* [size] local rank per rank (malloc'd) */
    MPI_Comm node_comm;             /* ranks of this node */
} fr_nodeinfo_t;

/* Group the ranks of @p comm by node (collective). Real nodes come from
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); @p node_size > 0 fakes nodes
 * of that many consecutive ranks, and a FASTREDUCE_HOSTID value per rank
 * (@p hostid, NULL when unset; ignored when faking by size)
 * (when set on any rank) names the node of each rank, like NCCL_HOSTID.
 * Nodes are numbered by their lowest rank. */
fr_status_t fr_node_group(MPI_Comm comm, int node_size, const char *hostid, fr_nodeinfo_t *out);
void fr_node_free(fr_nodeinfo_t *info);

/* This process's place among its host's processes of MPI_COMM_WORLD, as
 * the launcher (Open MPI, MPICH's and Intel MPI's Hydra, PMI, Slurm) gave
 * it, or -1; *@p local_size (when not NULL): how many the same launcher
 * says run on the host, -1 when it does not say. Read, not asked of MPI:
 * the process's first communicator may hold only some of the world's
 * processes, and a collective over the world made by those alone would
 * wait for the others forever. */
int fr_launcher_local(int world_size, int *local_size);

#endif
