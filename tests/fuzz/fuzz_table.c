/* libFuzzer target: a whole tuning table file (header, "# key: value"
 * fields, rules) through fr_table_read_file, read from a file as from disk
 * (fz_as_file). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_as_file("fuzz_table", data, size);

    fr_table_t t = {0};
    fr_table_meta_t m;
    int ndiag = 0, nbad = -1;
    fr_status_t st = fr_table_read_file(&t, &m, path, fz_count_diag, &ndiag, &nbad);
    FZ_ASSERT(nbad == ndiag);
    if (st != FR_SUCCESS) {
        FZ_ASSERT(t.n == 0);   /* a rejected file adds no rule */
    } else {
        /* header fields in range and NUL-terminated */
        FZ_ASSERT(m.version == 0 || m.version == 1);
        FZ_ASSERT(m.nodes >= 0 && m.ppn >= 0 && m.ranks >= 0);
        FZ_ASSERT(memchr(m.fingerprint, 0, sizeof m.fingerprint) && memchr(m.mpi, 0, sizeof m.mpi) &&
                  memchr(m.ucx, 0, sizeof m.ucx) && memchr(m.nccl, 0, sizeof m.nccl) &&
                  memchr(m.fastreduce, 0, sizeof m.fastreduce) && memchr(m.date, 0, sizeof m.date) &&
                  memchr(m.measured, 0, sizeof m.measured) && memchr(m.command, 0, sizeof m.command));
        char why[512];
        int unknown = 0;
        fr_table_meta_compare(&m, "1s1n2c2t-0gpu-1eth", 1, 2, why, sizeof why, &unknown);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (f) {
            fr_table_meta_print(&m, f);
            fclose(f);
            free(text);
        }
        fz_match_some(&t, data, size);
        fz_check_round_trip(&t);
    }
    fr_table_free(&t);
    return 0;
}
