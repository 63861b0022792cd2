/* Memory the node's ranks share (fr_mem_alloc): this process's own
 * allocations, and the mappings it made of its peers' (docs/architecture.md,
 * "Memory the node shares"). */
#ifndef FR_MEM_H
#define FR_MEM_H

#include <stdint.h>
#include <stddef.h>

/* Where a buffer lies in a process's shared memory, as a peer on the node
 * needs it to map the buffer: the allocation's memfd (its descriptor in the
 * owner and its device and inode, which name it for as long as anyone maps
 * it: ordinary and huge-page memfds number their inodes apart, so the
 * inode alone may be another's) and the buffer's offset in it. */
typedef struct fr_mem_ref {
    uint64_t ino;     /* the memfd's inode number */
    uint64_t dev;     /* and its file system's device */
    uint64_t size;    /* bytes of the allocation */
    uint64_t off;     /* where the buffer starts in it */
    int32_t  fd;      /* the owner's descriptor of the memfd */
    int32_t  pad;
} fr_mem_ref_t;

/* Whether [p, p + bytes) lies in one live allocation of this process (and
 * bytes > 0); *ref says where. */
int fr_mem_find(const void *p, size_t bytes, fr_mem_ref_t *ref);

/* How many allocations of this process are live (each holds a descriptor). */
size_t fr_mem_live(void);

/* How many allocations this process has freed so far: a peer that saw
 * another number last time checks the mappings it keeps of this process. */
uint64_t fr_mem_frees(void);

/* The address in this process of the buffer @p ref of process @p pid on
 * this node, whose count of frees is @p frees: the allocation is mapped the
 * first time and the mapping kept. NULL when it cannot be mapped (the
 * reason in the log at INFO). Thread-safe. */
char *fr_mem_peer(long pid, uint64_t frees, const fr_mem_ref_t *ref);

/* Drop the mappings of peers' allocations that were freed or whose owner
 * ended (fr_comm_destroy calls it). */
void fr_mem_peer_sweep(void);

/* Have @p fn(base, size) called for each allocation fr_mem_free frees,
 * before it is unmapped (UCX's registrations go there: ucx.c). One hook;
 * NULL removes it. */
void fr_mem_on_free(void (*fn)(void *base, size_t size));

#endif
