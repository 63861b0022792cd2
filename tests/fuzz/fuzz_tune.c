/* libFuzzer target: a FASTREDUCE_TUNE string (inline rules separated by ';'
 * or newlines) through fr_table_parse, then matched, printed and reparsed. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fz_cstring(data, size);
    if (!s) return 0;
    fr_table_t t = {0};
    int ndiag = 0, nbad = -1;
    fr_status_t st = fr_table_parse(&t, s, "FASTREDUCE_TUNE", FR_SRC_TUNE, fz_count_diag, &ndiag, &nbad);
    if (st == FR_SUCCESS) {
        FZ_ASSERT(nbad == ndiag);   /* nbad counts exactly the diagnostics reported */
        fz_match_some(&t, data, size);
        fz_check_round_trip(&t);
        /* the default table appended behind, as select.c builds the table */
        FZ_ASSERT(fr_table_parse(&t, fr_default_table, "default", FR_SRC_DEFAULT, fz_count_diag, &ndiag, &nbad) ==
                      FR_SUCCESS && nbad == 0);
    }
    fr_table_free(&t);
    free(s);
    return 0;
}
