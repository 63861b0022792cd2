/* FR_Alloc_mem and FR_Free_mem: MPI_Alloc_mem and MPI_Free_mem under the
 * interposer. Memory from fr_mem_alloc, so that the collectives on it go
 * zero-copy; where it cannot be had (size 0, FASTREDUCE_DISABLE=1, no
 * memfd), or where it would only cost a descriptor (below), the MPI
 * library's own. */
#include <stdint.h>
#include <sys/resource.h>
#include "fastreduce.h"
#include "log.h"
#include "mem.h"
#include "mpi_api.h"
#include "mpi_stats.h"

/* Each allocation of fr_mem_alloc holds a file descriptor, which the
 * program may need for its own files: below the smallest zero-copy size
 * (4 KiB) an allocation would gain nothing for it, and past half the
 * limit of open files the program's own would soon fail. */
#define ALLOC_MIN 4096

static const char *why_not_shared(MPI_Aint size)
{
    if (size < ALLOC_MIN) return "under 4 KiB";
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY && fr_mem_live() >= r.rlim_cur / 2)
        return "half the open files already";
    return NULL;
}

int FR_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    fr_mpi_served_t h;
    fr_mpi_call_begin(&h);
    int err;
    void *p = NULL;
    h.bytes = (double)size;
    h.nranks = 1;
    if (h.mode & FR_MPI_DISABLED) {
        h.what = "FASTREDUCE_DISABLE";
    } else if (size <= 0 || !baseptr) {
        h.what = size < 0 ? "negative size" : size == 0 ? "size 0" : "baseptr is NULL";
    } else if ((h.what = why_not_shared(size))) {
        /* (h.what says why) */
    } else if (fr_mem_alloc((size_t)size, &p) != FR_SUCCESS) {
        FR_INFO(FR_SUB_SHM, "MPI_Alloc_mem of %lld bytes goes to the MPI library: %s", (long long)size,
                fr_last_error());
        h.what = "fr_mem_alloc failed";
    } else {
        h.served = 1;
        h.what = "fr_mem_alloc";
    }
    if (h.served) {
        *(void **)baseptr = p;
        err = MPI_SUCCESS;
    } else {
        err = PMPI_Alloc_mem(size, info, baseptr);
    }
    fr_mpi_call_end(FR_MPI_ALLOC_MEM, &h, 0, MPI_DATATYPE_NULL, MPI_COMM_NULL);
    return err;
}

int FR_Free_mem(void *base)
{
    fr_mpi_served_t h;
    fr_mpi_call_begin(&h);
    h.nranks = 1;
    int err = MPI_SUCCESS;
    /* (by address: FASTREDUCE_DISABLE may have been read after the allocation) */
    if (base && fr_mem_shared(base, 1)) {
        h.served = 1;
        h.what = "fr_mem_free";
        if (fr_mem_free(base) != FR_SUCCESS) err = fr_mpi_error(FR_ERR_INVALID_ARG);
    } else {
        h.what = "not from fr_mem_alloc";
        err = PMPI_Free_mem(base);
    }
    fr_mpi_call_end(FR_MPI_FREE_MEM, &h, 0, MPI_DATATYPE_NULL, MPI_COMM_NULL);
    return err;
}
