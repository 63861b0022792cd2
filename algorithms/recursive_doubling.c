/* The recursive-doubling pattern (recursive_doubling.h). */
#include "recursive_doubling.h"
#include "alg_util.h"

fr_status_t fr_rd_allreduce(struct fr_comm *comm, const fr_call_t *call, void *buf, const void *src,
                            size_t count, void *tmp, const fr_rank_map_t *map, unsigned step)
{
    size_t bytes = count * fr_dtype_size(call->dtype);
    const void *cur = src;
    for (int mask = 1, t = 0; mask < map->n; mask <<= 1, t++) {
        int pv = map->me ^ mask;
        FR_CHECK(fr_alg_xchg(comm, map->rank(map->arg, pv), cur, bytes, tmp, bytes, step + (unsigned)t));
        fr_alg_reduce_ordered(buf, cur, tmp, pv < map->me, count, call->dtype, call->op);
        cur = buf;
    }
    if (cur != buf && bytes) memcpy(buf, cur, bytes);   /* n == 1: nothing to combine */
    return FR_SUCCESS;
}
