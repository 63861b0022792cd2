/* Node grouping: real nodes from MPI_Comm_split_type, or faked ones
 * (FASTREDUCE_NODE_SIZE consecutive ranks, or per-rank FASTREDUCE_HOSTID). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "topology.h"
#include "settings.h"
#include "log.h"

/* leader[r] is the lowest rank sharing rank r's node; fill the rest. */
static fr_status_t fill_from_leaders(MPI_Comm comm, const int *leader, int size, int rank,
                                     fr_nodeinfo_t *out)
{
    out->rank_node = malloc(sizeof(int) * (size_t)size);
    out->rank_local = malloc(sizeof(int) * (size_t)size);
    int *count = calloc((size_t)size, sizeof(int));
    int *index = malloc(sizeof(int) * (size_t)size);
    if (!out->rank_node || !out->rank_local || !count || !index) {
        free(count); free(index);
        /* (still in the split, with no node, as the others wait in it;
         * fr_comm_create then agrees on the failure) */
        PMPI_Comm_split(comm, MPI_UNDEFINED, rank, &out->node_comm);
        return FR_ERROR(FR_ERR_NO_MEMORY, "node grouping: out of memory for %d ranks", size);
    }
    int nnodes = 0;
    for (int r = 0; r < size; r++) {
        if (leader[r] == r) index[r] = nnodes++;
        int l = leader[r];
        out->rank_node[r] = index[l];
        out->rank_local[r] = count[l]++;
    }
    int ppn = 0;
    for (int r = 0; r < size; r++) if (count[r] > ppn) ppn = count[r];
    out->nnodes = nnodes;
    out->node = out->rank_node[rank];
    out->local_rank = out->rank_local[rank];
    out->local_size = count[leader[rank]];
    out->ppn = ppn;
    free(count);
    free(index);
    if (PMPI_Comm_split(comm, out->node, rank, &out->node_comm) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "node grouping: MPI_Comm_split failed");
    return FR_SUCCESS;
}

/* Collective: MPI_SUCCESS where every rank of @p comm has @p ok, else
 * MPI_ERR_NO_MEM. A rank that could not allocate a receive buffer cannot
 * join the gather that fills it, so the ranks first agree whether all can
 * (a rank skipping it alone would leave the others waiting there). */
static int all_have(MPI_Comm comm, int ok)
{
    int all = 0;
    int rc = PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    return rc != MPI_SUCCESS ? rc : all ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

/* leader[r]: the lowest rank whose node name is rank r's, the names
 * compared whole (however long: two ids that differ only at their end
 * are two nodes). Collective over @p comm. */
static fr_status_t leaders_by_name(MPI_Comm comm, const char *name, int size, int *leader)
{
    size_t n = strlen(name);
    int mine = n > INT_MAX / 2 ? INT_MAX / 2 : (int)n;   /* (an environment variable is never near) */
    int *len = malloc(sizeof(int) * (size_t)size), *at = malloc(sizeof(int) * (size_t)size);
    char *all = NULL;
    int here = !len || !at;   /* (out of memory on this rank, not another) */
    int rc = all_have(comm, !here);
    if (rc == MPI_SUCCESS) rc = PMPI_Allgather(&mine, 1, MPI_INT, len, 1, MPI_INT, comm);
    long long total = 0;
    for (int r = 0; rc == MPI_SUCCESS && r < size; r++) {
        at[r] = (int)total;
        total += len[r];
    }
    if (rc == MPI_SUCCESS && total > INT_MAX) rc = MPI_ERR_COUNT;   /* every rank sees the same total */
    if (rc == MPI_SUCCESS) {
        here = !(all = malloc(total ? (size_t)total : 1));
        rc = all_have(comm, !here);
    }
    if (rc == MPI_SUCCESS) rc = PMPI_Allgatherv(name, mine, MPI_CHAR, all, len, at, MPI_CHAR, comm);
    for (int r = 0; rc == MPI_SUCCESS && r < size; r++) {
        leader[r] = r;
        for (int q = 0; q < r; q++)
            if (len[q] == len[r] && !memcmp(all + at[q], all + at[r], (size_t)len[r])) {
                leader[r] = q;
                break;
            }
    }
    free(len);
    free(at);
    free(all);
    if (rc == MPI_ERR_NO_MEM)
        return FR_ERROR(FR_ERR_NO_MEMORY, "node grouping: out of memory %s", here ? "on this rank" : "on another rank");
    if (rc == MPI_ERR_COUNT) return FR_ERROR(FR_ERR_CONFIG, "node grouping: the node names add up to over 2 GiB");
    return rc == MPI_SUCCESS ? FR_SUCCESS : FR_ERROR(FR_ERR_MPI, "node grouping: exchanging node names failed");
}

/* A launcher's variable as a number from 0 to @p below - 1, else -1. */
static int env_below(const char *name, int below)
{
    const char *v = name ? getenv(name) : NULL;
    char *end = NULL;
    long n = v && *v ? strtol(v, &end, 10) : -1;
    return n >= 0 && !*end && n < below ? (int)n : -1;
}

int fr_launcher_local(int world_size, int *local_size)
{
    static const char *const vars[][2] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                          {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                                          {"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"},
                                          {"SLURM_LOCALID", NULL}};
    if (local_size) *local_size = world_size == 1 ? 1 : -1;
    if (world_size == 1) return 0;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        int r = env_below(vars[i][0], world_size);
        if (r < 0) continue;
        int n = env_below(vars[i][1], world_size + 1);
        if (local_size) *local_size = n > r ? n : -1;
        return r;
    }
    return -1;
}

/* Once a process: this rank's node size is not rank 0's. */
static void warn_node_size(int own, int used)
{
    static int warned;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) return;
    FR_WARN(FR_SUB_TOPO, "FASTREDUCE_NODE_SIZE (or fr_config_t.node_size) is %d on this rank but %d on the "
            "communicator's rank 0; every rank groups nodes by rank 0's %d", own, used, used);
}

fr_status_t fr_node_group(MPI_Comm comm, int node_size, const char *hostid, fr_nodeinfo_t *out)
{
    int rank, size, rc = MPI_SUCCESS;
    memset(out, 0, sizeof *out);
    out->node_comm = MPI_COMM_NULL;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    int *leader = malloc(sizeof(int) * (size_t)size);

    /* Every rank groups by rank 0's node size: a rank grouping by its own
     * would make other MPI calls than the rest below (a hang) or count
     * other nodes. The same reduction says whether any rank names its node
     * with FASTREDUCE_HOSTID, and whether any lacks memory for leader[]
     * (then every rank stops here, none waiting in a gather it skips). */
    int own = node_size > 0 ? node_size : 0;
    int mine[3] = { hostid != NULL, rank == 0 ? own : -1, !leader }, all[3] = { 0, own, !leader };
    rc |= PMPI_Allreduce(mine, all, 3, MPI_INT, MPI_MAX, comm);
    if (all[2]) {
        const char *where = leader ? "on another rank" : "on this rank";
        free(leader);
        return FR_ERROR(FR_ERR_NO_MEMORY, "node grouping: out of memory %s", where);
    }
    node_size = all[1];
    if (rc == MPI_SUCCESS && node_size != own) warn_node_size(own, node_size);
    if (node_size > 0) hostid = NULL;
    int any = node_size > 0 ? 0 : all[0];
    fr_status_t named = FR_SUCCESS;

    if (node_size > 0) {
        for (int r = 0; r < size; r++) leader[r] = r - r % node_size;
    } else if (any) {
        /* (MPI writes up to MPI_MAX_PROCESSOR_NAME characters; one more keeps a NUL) */
        char name[MPI_MAX_PROCESSOR_NAME + 1] = {0};
        int len = 0;
        if (!hostid) PMPI_Get_processor_name(name, &len);
        named = leaders_by_name(comm, hostid ? hostid : name, size, leader);
    } else {
        MPI_Comm shared;
        int lead;
        rc |= PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
        if (rc == MPI_SUCCESS) {
            rc |= PMPI_Allreduce(&rank, &lead, 1, MPI_INT, MPI_MIN, shared);
            PMPI_Comm_free(&shared);
            rc |= PMPI_Allgather(&lead, 1, MPI_INT, leader, 1, MPI_INT, comm);
        }
    }
    fr_status_t st = named != FR_SUCCESS ? named
                     : rc == MPI_SUCCESS ? fill_from_leaders(comm, leader, size, rank, out)
                                         : FR_ERROR(FR_ERR_MPI, "node grouping: an MPI call failed");
    free(leader);
    if (st != FR_SUCCESS) fr_node_free(out);
    return st;
}

void fr_node_free(fr_nodeinfo_t *info)
{
    free(info->rank_node);
    free(info->rank_local);
    info->rank_node = info->rank_local = NULL;
    if (info->node_comm != MPI_COMM_NULL) PMPI_Comm_free(&info->node_comm);
    info->node_comm = MPI_COMM_NULL;
}
