/* libFuzzer target: a FASTREDUCE_ALGO string ("NAME" or
 * "allreduce=NAME,bcast=NAME") through fr_table_parse_algo, the public
 * parser select.c calls for it. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fz_cstring(data, size);
    if (!s) return 0;
    fr_table_t t = {0};
    int ndiag = 0, nbad = -1;
    fr_status_t st = fr_table_parse_algo(&t, s, fz_count_diag, &ndiag, &nbad);
    if (st == FR_SUCCESS) {
        FZ_ASSERT(nbad == ndiag);
        FZ_ASSERT(t.n <= FR_COLL_COUNT);   /* at most one forced rule per collective */
        for (int i = 0; i < t.n; i++) {
            const fr_rule_t *r = &t.rules[i];
            FZ_ASSERT(r->src == FR_SRC_ALGO && r->alg >= 0 && r->alg < fr_nalgs && r->mem != 0);
            FZ_ASSERT((int)fr_algs[r->alg]->coll == r->coll);
        }
        fz_match_some(&t, data, size);
        fz_check_round_trip(&t);
    }
    fr_table_free(&t);
    free(s);
    return 0;
}
