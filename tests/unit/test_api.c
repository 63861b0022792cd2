/* Unit tests of the public API that need no MPI job of several ranks:
 * status names, version, datatype and op names, the NULL-handle paths,
 * fr_comm_create() before MPI_Init(), and the string fields of
 * fr_config_t (the settings' parsers are in test_settings.c). Only the config tests
 * initialise MPI (a one-rank job, no launcher), each in the process of its
 * own that Criterion runs every test in. */
#include "config.h"
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
#include "fastreduce.h"
#include "internal.h"       /* the communicator's fingerprint and shape: a table file for this job */

Test(api, strerror_every_status_distinct)
{
    for (int s = 0; s < FR_STATUS_COUNT; s++) {
        const char *a = fr_strerror((fr_status_t)s);
        cr_assert_not_null(a, "fr_strerror(%d) is NULL", s);
        cr_assert(strlen(a) > 0, "fr_strerror(%d) is empty", s);
        for (int t = 0; t < s; t++)
            cr_assert_str_neq(a, fr_strerror((fr_status_t)t), "statuses %d and %d share the text '%s'", t, s, a);
    }
}

Test(api, strerror_names_the_status)
{
    /* the header's example: "FR_ERR_ROOT: root out of range" */
    cr_assert(strstr(fr_strerror(FR_ERR_ROOT), "FR_ERR_ROOT") != NULL, "'%s'", fr_strerror(FR_ERR_ROOT));
    cr_assert(strstr(fr_strerror(FR_SUCCESS), "FR_SUCCESS") != NULL, "'%s'", fr_strerror(FR_SUCCESS));
    cr_assert(strstr(fr_strerror(FR_ERR_COUNT), "FR_ERR_COUNT") != NULL, "'%s'", fr_strerror(FR_ERR_COUNT));
    cr_assert(strstr(fr_strerror(FR_ERR_INTERNAL), "FR_ERR_INTERNAL") != NULL, "'%s'", fr_strerror(FR_ERR_INTERNAL));
}

Test(api, strerror_unknown_is_sane)
{
    const int bad[] = { FR_STATUS_COUNT, FR_STATUS_COUNT + 1, 1000, -1, INT32_MIN };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a = fr_strerror((fr_status_t)bad[i]);
        cr_assert_not_null(a, "fr_strerror(%d) is NULL", bad[i]);
        cr_assert(strlen(a) > 0, "fr_strerror(%d) is empty", bad[i]);
        cr_assert_str_neq(a, fr_strerror(FR_SUCCESS), "unknown status %d reads as success", bad[i]);
    }
}

Test(api, version)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", FR_VERSION_MAJOR, FR_VERSION_MINOR, FR_VERSION_PATCH);
    cr_assert_not_null(fr_version());
    cr_assert_str_eq(fr_version(), want);
    cr_assert_eq(FR_VERSION, FR_VERSION_MAJOR * 10000 + FR_VERSION_MINOR * 100 + FR_VERSION_PATCH);
    /* the loaded library's number says the same as its string */
    int maj, min, pat;
    cr_assert_eq(sscanf(fr_version(), "%d.%d.%d", &maj, &min, &pat), 3);
    cr_assert_eq(fr_version_number(), maj * 10000 + min * 100 + pat);
    cr_assert_eq(fr_version_number(), FR_VERSION);
}

/* The build's own record of whether configure found CUDA (config.h) is the
 * independent reference for what the loaded library says of itself. */
Test(api, cuda_support_matches_the_build)
{
#ifdef FR_HAVE_CUDA
    cr_assert_eq(fr_cuda_support(), 1);
#else
    cr_assert_eq(fr_cuda_support(), 0);
#endif
}

Test(api, dtype_sizes_and_names)
{
    static const struct { fr_dtype_t t; size_t size; const char *name; } want[] = {
        { FR_INT8, 1, "int8" },       { FR_UINT8, 1, "uint8" },       { FR_INT32, 4, "int32" },
        { FR_UINT32, 4, "uint32" },   { FR_INT64, 8, "int64" },       { FR_UINT64, 8, "uint64" },
        { FR_FLOAT16, 2, "float16" }, { FR_BFLOAT16, 2, "bfloat16" }, { FR_FLOAT32, 4, "float32" },
        { FR_FLOAT64, 8, "float64" },
    };
    cr_assert_eq(sizeof want / sizeof want[0], (size_t)FR_DTYPE_COUNT, "the test lists every dtype");
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_assert_eq(fr_dtype_size(want[i].t), want[i].size, "fr_dtype_size(%s) = %zu", want[i].name,
                     fr_dtype_size(want[i].t));
        cr_assert_not_null(fr_dtype_name(want[i].t));
        cr_assert_str_eq(fr_dtype_name(want[i].t), want[i].name);
    }
    const int bad[] = { FR_DTYPE_COUNT, 99, -1 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(fr_dtype_size((fr_dtype_t)bad[i]), 0u, "fr_dtype_size(%d)", bad[i]);
        cr_assert_not_null(fr_dtype_name((fr_dtype_t)bad[i]));
        cr_assert_str_eq(fr_dtype_name((fr_dtype_t)bad[i]), "?", "fr_dtype_name(%d)", bad[i]);
    }
}

Test(api, op_names)
{
    static const char *const want[] = { "sum", "prod", "min", "max", "avg" };
    cr_assert_eq(sizeof want / sizeof want[0], (size_t)FR_OP_COUNT, "the test lists every op");
    for (int o = 0; o < FR_OP_COUNT; o++) {
        cr_assert_not_null(fr_op_name((fr_op_t)o));
        cr_assert_str_eq(fr_op_name((fr_op_t)o), want[o]);
    }
    const int bad[] = { FR_OP_COUNT, 99, -1 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_not_null(fr_op_name((fr_op_t)bad[i]));
        cr_assert_str_eq(fr_op_name((fr_op_t)bad[i]), "?", "fr_op_name(%d)", bad[i]);
    }
}

Test(api, last_error_empty_at_start)
{
    cr_assert_not_null(fr_last_error());
    cr_assert_str_eq(fr_last_error(), "");
}

Test(api, null_comm_allreduce)
{
    float s[4] = { 1, 2, 3, 4 }, r[4] = { 9, 9, 9, 9 };
    cr_assert_eq(fr_allreduce(s, r, 4, FR_FLOAT32, FR_SUM, NULL), FR_ERR_BAD_COMM);
    cr_assert_not_null(fr_last_error());
    cr_assert(strlen(fr_last_error()) > 0, "no detail message after FR_ERR_BAD_COMM");
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(r[i], 9.0f, "recvbuf changed");
        cr_assert_eq(s[i], (float)(i + 1), "sendbuf changed");
    }
    cr_assert_eq(fr_allreduce(FR_IN_PLACE, r, 4, FR_FLOAT32, FR_MAX, NULL), FR_ERR_BAD_COMM);
    cr_assert_eq(fr_allreduce(NULL, NULL, 0, FR_INT8, FR_SUM, NULL), FR_ERR_BAD_COMM);
}

Test(api, null_comm_bcast)
{
    int b[3] = { 5, 6, 7 };
    cr_assert_eq(fr_bcast(b, 3, FR_INT32, 0, NULL), FR_ERR_BAD_COMM);
    cr_assert(strlen(fr_last_error()) > 0, "no detail message after FR_ERR_BAD_COMM");
    cr_assert(b[0] == 5 && b[1] == 6 && b[2] == 7, "buffer changed");
}

Test(api, null_comm_queries)
{
    cr_assert_eq(fr_comm_rank(NULL), -1);
    cr_assert_eq(fr_comm_size(NULL), -1);
    cr_assert_null(fr_allreduce_algorithm(NULL, 100, FR_FLOAT32, FR_SUM));
    cr_assert_null(fr_bcast_algorithm(NULL, 100, FR_FLOAT32, 0));
}

Test(api, destroy_null)
{
    cr_assert_eq(fr_comm_destroy(NULL), FR_SUCCESS);
}

Test(api, create_before_mpi_init)
{
    int inited = 1;
    MPI_Initialized(&inited);
    cr_assert_eq(inited, 0, "MPI must not be initialised in this test");
    fr_comm_t c = (fr_comm_t)(uintptr_t)0x10;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    cr_assert_eq(st, FR_ERR_NOT_INITIALIZED, "got %d (%s)", (int)st, fr_strerror(st));
    cr_assert_null(c, "*out must be NULL on failure");
    cr_assert(strlen(fr_last_error()) > 0, "no detail message after FR_ERR_NOT_INITIALIZED");
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = "ring";
    st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c);
    cr_assert_eq(st, FR_ERR_NOT_INITIALIZED, "with a config: got %d (%s)", (int)st, fr_strerror(st));
}

/* The detail message is per thread. */
static void *other_thread(void *arg)
{
    char *out = arg;
    snprintf(out, 256, "%s", fr_last_error());            /* this thread has had no failure */
    fr_bcast(NULL, 1, FR_INT8, 0, NULL);                   /* now it has */
    snprintf(out + 256, 256, "%s", fr_last_error());
    return NULL;
}

Test(api, last_error_per_thread)
{
    cr_assert_eq(fr_allreduce(NULL, NULL, 1, FR_INT8, FR_SUM, NULL), FR_ERR_BAD_COMM);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", fr_last_error());
    cr_assert(strlen(mine) > 0);
    char seen[512] = "";
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, seen), 0);
    pthread_join(t, NULL);
    cr_assert_str_eq(seen, "", "a new thread sees another thread's error '%s'", seen);
    cr_assert(strlen(seen + 256) > 0, "the other thread's own failure left no message");
    cr_assert_str_eq(fr_last_error(), mine, "another thread's failure changed this thread's message");
}

/* ---- fr_config_t ---------------------------------------------------------- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_geq(fputs(text, f), 0);
    cr_assert_eq(fclose(f), 0);
}

/* The algorithm a 1 KiB float allreduce takes on a new communicator made with @p cfg. */
static const char *algorithm_with(const fr_config_t *cfg)
{
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, cfg, &c);
    cr_assert_eq(st, FR_SUCCESS, "fr_comm_create: %s", fr_last_error());
    const char *a = fr_allreduce_algorithm(c, 256, FR_FLOAT32, FR_SUM);
    cr_assert_not_null(a);
    fr_comm_destroy(c);
    return a;   /* (the registry's name: it outlives the communicator) */
}

/* An empty tune_file counts as unset, as FASTREDUCE_TUNE_FILE="" does: the
 * variable names the table, and without it the FASTREDUCE_TUNE_PATH search
 * finds one. (An empty name was opened as a file, failed, and turned the
 * search off.) */
Test(config, empty_tune_file_is_unset)
{
    char dir[] = "/tmp/test_api_XXXXXX", var[64], found[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(var, sizeof var, "%s/named.table", dir);
    snprintf(found, sizeof found, "%s/job.tune", dir);
    unsetenv("FASTREDUCE_ALGO");
    unsetenv("FASTREDUCE_TUNE");
    unsetenv("FASTREDUCE_TUNE_FILE");
    setenv("FASTREDUCE_TUNE_PATH", "", 1);   /* no search */
    cr_assert_eq(MPI_Init(NULL, NULL), MPI_SUCCESS);
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.tune_file = "";

    /* the built-in table's choice, which neither table below makes */
    fr_comm_t c = NULL;
    cr_assert_eq(fr_comm_create(MPI_COMM_WORLD, &cfg, &c), FR_SUCCESS, "%s", fr_last_error());
    char header[512];
    snprintf(header, sizeof header, "# fastreduce tuning table v1\n# fingerprint: %s\n# nodes: %d\n# ppn: %d\n",
             c->fingerprint[0] ? c->fingerprint : "unknown", c->nnodes, c->ppn);
    const char *def = fr_allreduce_algorithm(c, 256, FR_FLOAT32, FR_SUM);
    cr_assert_not_null(def);
    cr_assert_str_neq(def, "recursive_doubling");
    cr_assert_str_neq(def, "rabenseifner");
    fr_comm_destroy(c);

    write_text(var, "# fastreduce tuning table v1\nallreduce host * * * recursive_doubling\n");
    setenv("FASTREDUCE_TUNE_FILE", var, 1);
    cr_assert_str_eq(algorithm_with(&cfg), "recursive_doubling", "FASTREDUCE_TUNE_FILE was not read");
    unsetenv("FASTREDUCE_TUNE_FILE");

    char text[1024];
    snprintf(text, sizeof text, "%sallreduce host * * * rabenseifner\n", header);
    write_text(found, text);
    setenv("FASTREDUCE_TUNE_PATH", dir, 1);
    cr_assert_str_eq(algorithm_with(&cfg), "rabenseifner", "the FASTREDUCE_TUNE_PATH search did not find %s", found);

    /* a named file still wins over the search */
    cfg.tune_file = var;
    cr_assert_str_eq(algorithm_with(&cfg), "recursive_doubling");
    MPI_Finalize();
    unlink(var);
    unlink(found);
    rmdir(dir);
}
