/* test_select: algorithm selection is the same on every rank and follows
 * the documented sources (docs/tuning.md): FASTREDUCE_ALGO, FASTREDUCE_TUNE,
 * FASTREDUCE_TUNE_FILE, the fr_config_t fields that replace them, and the
 * built-in table; malformed rules are reported and skipped; a forced
 * algorithm that declines falls back. Every selection is also run, and its
 * result checked against a reference each rank computes itself.
 *
 * Run with 2 or more ranks (1 rank works but checks less).
 */
#include "testutil.h"
#include <dirent.h>
#include "config.h" /* FR_HAVE_NCCL */
#include "internal.h"   /* the node's fingerprint, which tuning tables record */

static int np, me;

static void env_clear(void)
{
    unsetenv("FASTREDUCE_ALGO");
    unsetenv("FASTREDUCE_TUNE");
    unsetenv("FASTREDUCE_TUNE_FILE");
    unsetenv("FASTREDUCE_NODE_SIZE");
    unsetenv("FASTREDUCE_DEBUG_FILE");
    unsetenv("FASTREDUCE_TUNE_PATH");
}

/* Collective: create a communicator; NULL (with a failure) if that failed anywhere.
 * If @p warn is not NULL, stderr is captured and *warn set to 1 when some
 * rank printed @p warn_text. */
static fr_comm_t make_comm(const char *label, const fr_config_t *cfg, const char *warn_text, int *warn)
{
    tu_begin("%s: fr_comm_create", label);
    tu_capture_t cap;
    if (warn_text) tu_capture_begin(&cap);
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, cfg, &c);
    if (warn_text) {
        char *text = tu_capture_end(&cap);
        int mine = strstr(text, warn_text) != NULL;
        free(text);
        MPI_Allreduce(&mine, warn, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    TU_CHECK(st == FR_SUCCESS && c, "returned %s", tu_status(st));
    if (!tu_all(st == FR_SUCCESS && c)) {
        if (c) fr_comm_destroy(c);
        return NULL;
    }
    return c;
}

static void free_comm(const char *label, fr_comm_t c)
{
    if (!c) return;
    tu_begin("%s: fr_comm_destroy", label);
    fr_status_t st = fr_comm_destroy(c);
    TU_CHECK(st == FR_SUCCESS, "returned %s", tu_status(st));
}

static inline uint64_t val(int r, size_t i) { return (uint64_t)((r * 3 + (int)(i % 1009)) % 11); }

/* Check that allreduce of @p count elements of @p dt picks @p want (or, if
 * @p want starts with '!', anything but the rest), and that it is right. */
static void expect_ar(fr_comm_t c, const char *label, size_t count, fr_dtype_t dt, const char *want)
{
    tu_begin("%s: allreduce %zu x %s (%zu bytes) picks %s", label, count, tu_dtype_names[dt],
             count * tu_dtype_sizes[dt], want);
    const char *got = fr_allreduce_algorithm(c, count, dt, FR_SUM);
    if (want[0] == '!')
        TU_CHECK(got && strcmp(got, want + 1) != 0, "picked %s", got ? got : "NULL");
    else
        TU_CHECK(got && strcmp(got, want) == 0, "picked %s", got ? got : "NULL");
    TU_CHECK(tu_same_everywhere(got ? tu_hash_bytes(got, strlen(got)) : 0), "ranks picked different algorithms");

    tu_begin("%s: allreduce %zu x %s result", label, count, tu_dtype_names[dt]);
    size_t es = tu_dtype_sizes[dt];
    unsigned char *buf = tu_alloc(count * es);
    tu_guard_set(buf, count * es);
    for (size_t i = 0; i < count; i++) {
        uint64_t v = val(me, i);
        memcpy(buf + i * es, &v, es);  /* little-endian low bytes; dt is an integer type */
    }
    fr_status_t st = fr_allreduce(FR_IN_PLACE, buf, count, dt, FR_SUM, c);
    if (TU_CHECK(st == FR_SUCCESS, "fr_allreduce returned %s", tu_status(st))) {
        for (size_t i = 0; i < count; i++) {
            uint64_t w = 0, g = 0;
            for (int r = 0; r < np; r++) w += val(r, i);
            memcpy(&g, buf + i * es, es);
            if (!TU_CHECK(g == w, "index %zu: got %llu expected %llu", i, (unsigned long long)g,
                          (unsigned long long)w))
                break;
        }
    }
    long where;
    TU_CHECK(tu_guard_ok(buf, count * es, &where), "guard changed at %ld", where);
    tu_free(buf);
}

static void expect_bc(fr_comm_t c, const char *label, size_t count, const char *want)
{
    for (int root = 0; root < np; root++) {
        tu_begin("%s: bcast %zu bytes root %d picks %s", label, count, root, want);
        const char *got = fr_bcast_algorithm(c, count, FR_UINT8, root);
        if (want[0] == '!')
            TU_CHECK(got && strcmp(got, want + 1) != 0, "picked %s", got ? got : "NULL");
        else
            TU_CHECK(got && strcmp(got, want) == 0, "picked %s", got ? got : "NULL");
        unsigned char *buf = tu_alloc(count);
        tu_guard_set(buf, count);
        for (size_t i = 0; i < count; i++)
            buf[i] = me == root ? (unsigned char)tu_hash3(root, i, 1) : (unsigned char)me;
        fr_status_t st = fr_bcast(buf, count, FR_UINT8, root, c);
        if (TU_CHECK(st == FR_SUCCESS, "fr_bcast returned %s", tu_status(st)))
            for (size_t i = 0; i < count; i++)
                if (!TU_CHECK(buf[i] == (unsigned char)tu_hash3(root, i, 1), "index %zu wrong", i)) break;
        long where;
        TU_CHECK(tu_guard_ok(buf, count, &where), "guard changed at %ld", where);
        tu_free(buf);
    }
}

/* ---- the tests ----------------------------------------------------------- */

/* Ranks set different FASTREDUCE_ALGO (or fr_config_t.algo): rank 0's wins. */
static void test_rank_dependent_algo(void)
{
    env_clear();
    setenv("FASTREDUCE_ALGO", me == 0 ? "allreduce=ring,bcast=binomial" : "allreduce=tree,bcast=pipeline", 1);
    fr_comm_t c = make_comm("per-rank FASTREDUCE_ALGO", NULL, NULL, NULL);
    if (c) {
        expect_ar(c, "per-rank FASTREDUCE_ALGO", 5, FR_INT32, "ring");
        expect_ar(c, "per-rank FASTREDUCE_ALGO", 70001, FR_INT32, "ring");
        expect_bc(c, "per-rank FASTREDUCE_ALGO", 3, "binomial");
        expect_bc(c, "per-rank FASTREDUCE_ALGO", 100003, "binomial");
    }
    free_comm("per-rank FASTREDUCE_ALGO", c);
    env_clear();

    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = me == 0 ? "rabenseifner" : "recursive_doubling";
    c = make_comm("per-rank config.algo", &cfg, NULL, NULL);
    if (c) {
        expect_ar(c, "per-rank config.algo", 9, FR_INT64, "rabenseifner");
        expect_ar(c, "per-rank config.algo", 40000, FR_UINT32, "rabenseifner");
    }
    free_comm("per-rank config.algo", c);
}

static void test_tune_inline(void)
{
    const char *label = "FASTREDUCE_TUNE";
    env_clear();
    /* the choice the default table makes for bcast, to show the rules leave it alone */
    fr_comm_t d = make_comm("default table", NULL, NULL, NULL);
    const char *bdef = d ? fr_bcast_algorithm(d, 1000, FR_UINT8, 0) : NULL;
    char bdef_s[64];
    snprintf(bdef_s, sizeof bdef_s, "%s", bdef ? bdef : "?");
    free_comm("default table", d);

    setenv("FASTREDUCE_TUNE", "allreduce host * * 0-1K recursive_doubling; allreduce host * * 1K-inf ring", 1);
    fr_comm_t c = make_comm(label, NULL, NULL, NULL);
    if (c) {
        expect_ar(c, label, 4, FR_INT32, "recursive_doubling");
        expect_ar(c, label, 1024, FR_UINT8, "recursive_doubling");  /* inclusive bound: the earlier rule */
        expect_ar(c, label, 1025, FR_UINT8, "ring");
        expect_ar(c, label, 300000, FR_INT32, "ring");
        expect_bc(c, label, 1000, bdef_s);
    }
    free_comm(label, c);

    /* malformed rules are skipped, the rest applies */
    label = "FASTREDUCE_TUNE with malformed rules";
    setenv("FASTREDUCE_TUNE",
           "allreduce host * * 0-1K recursive_doubling; this is not a rule; allreduce host * * 1K-inf ring;"
           " allreduce host * * 0-inf no_such_alg; allreduce host 8-2 * * tree; allreduce host * * 5Q tree", 1);
    int warned = 0;
    c = make_comm(label, NULL, "FASTREDUCE_TUNE:2", &warned);
    tu_begin("%s: rule 2 reported as FASTREDUCE_TUNE:2", label);
    TU_CHECK(warned, "no rank printed a warning naming FASTREDUCE_TUNE:2");
    if (c) {
        expect_ar(c, label, 16, FR_INT32, "recursive_doubling");
        expect_ar(c, label, 4096, FR_INT32, "ring");
    }
    free_comm(label, c);

    /* ranks disagree on FASTREDUCE_TUNE: rank 0's table is used everywhere */
    label = "per-rank FASTREDUCE_TUNE";
    setenv("FASTREDUCE_TUNE", me == 0 ? "allreduce host * * * tree" : "allreduce host * * * ring", 1);
    c = make_comm(label, NULL, NULL, NULL);
    if (c) {
        expect_ar(c, label, 7, FR_INT32, "tree");
        expect_ar(c, label, 100000, FR_INT32, "tree");
    }
    free_comm(label, c);

    /* cuda rules do not match host buffers; nodes and ppn ranges match the shape */
    label = "FASTREDUCE_TUNE cuda rule";
    setenv("FASTREDUCE_TUNE", "allreduce cuda * * * ring; allreduce host * * * tree", 1);
    c = make_comm(label, NULL, NULL, NULL);
    if (c) expect_ar(c, label, 100, FR_INT32, "tree");
    free_comm(label, c);

    if (np >= 2) {
        fr_config_t cfg = FR_CONFIG_INIT;
        setenv("FASTREDUCE_TUNE", "allreduce host 1 * * tree; allreduce host 2-inf * * ring", 1);
        cfg.node_size = 1;
        label = "FASTREDUCE_TUNE nodes range, node_size 1";
        c = make_comm(label, &cfg, NULL, NULL);
        if (c) expect_ar(c, label, 100, FR_INT32, "ring");
        free_comm(label, c);
        cfg.node_size = np;
        label = "FASTREDUCE_TUNE nodes range, node_size np";
        c = make_comm(label, &cfg, NULL, NULL);
        if (c) expect_ar(c, label, 100, FR_INT32, "tree");
        free_comm(label, c);

        setenv("FASTREDUCE_TUNE", "allreduce host * 1 * rabenseifner; allreduce host * 2-inf * tree", 1);
        cfg.node_size = 1;
        label = "FASTREDUCE_TUNE ppn range, node_size 1";
        c = make_comm(label, &cfg, NULL, NULL);
        if (c) expect_ar(c, label, 100, FR_INT32, "rabenseifner");
        free_comm(label, c);
        cfg.node_size = 0;
        label = "FASTREDUCE_TUNE ppn range, one node";
        c = make_comm(label, &cfg, NULL, NULL);
        if (c) expect_ar(c, label, 100, FR_INT32, "tree");
        free_comm(label, c);
    }
    env_clear();
}

/* The communicator's list of the rules of its shape (lib/select.c): a
 * table whose rules for other collectives, device memory, other node
 * counts and other ranks per node come between and ahead of the ones that
 * apply picks as the rule text says, with the list and without it (calls
 * then scan the whole table, as when the list could not be allocated). */
static void test_rule_index(void)
{
    env_clear();
    setenv("FASTREDUCE_TUNE",
           "bcast host * * 0-100 binomial; allreduce cuda * * * ring; allreduce host 2-inf * * rabenseifner;"
           " allreduce host * 99-inf * tree; allreduce host * * 0-1K recursive_doubling; bcast host * * * pipeline;"
           " allreduce host * * 1K-64K ring; allreduce * * * 64K-inf tree",
           1);
    for (int pass = 0; pass < 2; pass++) {
        const char *label = pass ? "rule index dropped: the whole table scanned" : "rule index";
        fr_comm_t c = make_comm(label, NULL, NULL, NULL);
        if (!c) continue;
        if (pass) {
            free(c->sel);
            c->sel = NULL;
        }
        expect_ar(c, label, 1, FR_INT32, "recursive_doubling");
        expect_ar(c, label, 1024, FR_UINT8, "recursive_doubling");
        expect_ar(c, label, 1025, FR_UINT8, "ring");
        expect_ar(c, label, 65536, FR_UINT8, "ring");
        expect_ar(c, label, 65537, FR_UINT8, "tree");
        expect_ar(c, label, 300000, FR_INT32, "tree");
        expect_bc(c, label, 100, "binomial");
        expect_bc(c, label, 101, "pipeline");
        free_comm(label, c);
    }
    env_clear();
}

static void test_tune_file(void)
{
    char path[256] = "";
    int bad_line = 0;
    if (me == 0) {
        char tmpl[] = "/tmp/fr_test_select_XXXXXX";
        int fd = mkstemp(tmpl);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f) {
            fprintf(f, "# fastreduce tuning table v1\n"                           /* 1 */
                       "# collective memory nodes ppn bytes algorithm\n"          /* 2 */
                       "\n"                                                       /* 3 */
                       "allreduce host * * 0-4K tree   # small ones\n"            /* 4 */
                       "allreduce host * * 4K-inf\n"                              /* 5: malformed */
                       "allreduce host * * 4097-inf rabenseifner\n"               /* 6 */
                       "bcast host * * * scatter_allgather\n");                   /* 7 */
            fclose(f);
            snprintf(path, sizeof path, "%s", tmpl);
        }
        bad_line = 5;
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(&bad_line, 1, MPI_INT, 0, MPI_COMM_WORLD);
    tu_begin("FASTREDUCE_TUNE_FILE: write the table");
    if (!TU_CHECK(path[0], "rank 0 could not write a temporary file")) return;

    char where[300];
    snprintf(where, sizeof where, "%s:%d", path, bad_line);
    const char *label = "FASTREDUCE_TUNE_FILE";
    env_clear();
    setenv("FASTREDUCE_TUNE_FILE", path, 1);
    int warned = 0;
    fr_comm_t c = make_comm(label, NULL, where, &warned);
    tu_begin("%s: the malformed line is reported as %s", label, where);
    TU_CHECK(warned, "no rank printed a warning naming %s", where);
    if (c) {
        expect_ar(c, label, 3, FR_INT32, "tree");
        expect_ar(c, label, 4096, FR_UINT8, "tree");
        expect_ar(c, label, 4097, FR_UINT8, "rabenseifner");
        expect_ar(c, label, 50000, FR_INT32, "rabenseifner");
        expect_bc(c, label, 777, "scatter_allgather");
    }
    free_comm(label, c);

    /* only rank 0 reads the file: the others need not even name it */
    label = "FASTREDUCE_TUNE_FILE on rank 0 only";
    if (me != 0) unsetenv("FASTREDUCE_TUNE_FILE");
    c = make_comm(label, NULL, NULL, NULL);
    if (c) {
        expect_ar(c, label, 3, FR_INT32, "tree");
        expect_ar(c, label, 50000, FR_INT32, "rabenseifner");
        expect_bc(c, label, 5, "scatter_allgather");
    }
    free_comm(label, c);
    env_clear();

    label = "config.tune_file on rank 0 only";
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.tune_file = me == 0 ? path : NULL;
    c = make_comm(label, &cfg, NULL, NULL);
    if (c) expect_ar(c, label, 60000, FR_INT32, "rabenseifner");
    free_comm(label, c);

    /* precedence: FASTREDUCE_ALGO > FASTREDUCE_TUNE > FASTREDUCE_TUNE_FILE */
    setenv("FASTREDUCE_TUNE_FILE", path, 1);
    setenv("FASTREDUCE_TUNE", "allreduce host * * * ring", 1);
    label = "FASTREDUCE_TUNE over FASTREDUCE_TUNE_FILE";
    c = make_comm(label, NULL, NULL, NULL);
    if (c) {
        expect_ar(c, label, 3, FR_INT32, "ring");
        expect_bc(c, label, 9, "scatter_allgather");  /* the file still serves bcast */
    }
    free_comm(label, c);
    setenv("FASTREDUCE_ALGO", "recursive_doubling", 1);
    label = "FASTREDUCE_ALGO over FASTREDUCE_TUNE";
    c = make_comm(label, NULL, NULL, NULL);
    if (c) expect_ar(c, label, 3, FR_INT32, "recursive_doubling");
    free_comm(label, c);
    unsetenv("FASTREDUCE_ALGO");

    /* a field of fr_config_t replaces its variable */
    label = "config.tune over FASTREDUCE_TUNE";
    memset(&cfg, 0, sizeof cfg);
    cfg.version = FR_VERSION;
    cfg.tune = "allreduce host * * * tree";
    c = make_comm(label, &cfg, NULL, NULL);
    if (c) expect_ar(c, label, 3, FR_INT32, "tree");
    free_comm(label, c);
    env_clear();

    if (me == 0) unlink(path);

    /* a file that cannot be read: every rank gets the same answer, and a
     * communicator that was made still works */
    label = "FASTREDUCE_TUNE_FILE missing";
    setenv("FASTREDUCE_TUNE_FILE", "/nonexistent/fastreduce/table", 1);
    tu_begin("%s: fr_comm_create agrees on every rank", label);
    tu_capture_t cap;
    tu_capture_begin(&cap);
    c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    free(tu_capture_end(&cap));
    TU_CHECK(tu_same_everywhere((uint64_t)st), "ranks returned different statuses (this one %s)", tu_status(st));
    TU_CHECK(st == FR_SUCCESS || c == NULL, "failed with %s but *out is not NULL", tu_status(st));
    if (tu_all(st == FR_SUCCESS && c)) {
        expect_ar(c, label, 100, FR_INT32, "!");
        free_comm(label, c);
    }
    env_clear();
}

/* A forced algorithm that declines falls back, and the result is right. */
static void test_decline(void)
{
    if (np < 2) return;
    env_clear();
    const char *label = "FASTREDUCE_ALGO=shm, FASTREDUCE_NODE_SIZE=1";
    setenv("FASTREDUCE_ALGO", "shm", 1);
    setenv("FASTREDUCE_NODE_SIZE", "1", 1);
    fr_comm_t c = make_comm(label, NULL, NULL, NULL);
    if (c) {
        expect_ar(c, label, 10, FR_INT32, "!shm");
        expect_ar(c, label, 200000, FR_INT32, "!shm");
        expect_bc(c, label, 10, "!shm");
        expect_bc(c, label, 100000, "!shm");
    }
    free_comm(label, c);
    env_clear();

    label = "config.algo=shm, config.node_size=1";
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = "shm";
    cfg.node_size = 1;
    c = make_comm(label, &cfg, NULL, NULL);
    if (c) {
        expect_ar(c, label, 33, FR_UINT8, "!shm");
        expect_bc(c, label, 33, "!shm");
    }
    free_comm(label, c);

    /* one node (node_size >= np): shm serves it */
    label = "config.algo=shm, one node";
    cfg.node_size = np;
    c = make_comm(label, &cfg, NULL, NULL);
    if (c) {
        expect_ar(c, label, 33, FR_INT32, "shm");
        expect_ar(c, label, 300001, FR_INT32, "shm");
        expect_bc(c, label, 33, "shm");
    }
    free_comm(label, c);

    /* two nodes at np >= 4 (node_size 2): shm declines again */
    if (np >= 3) {
        label = "config.algo=shm, node_size 2";
        cfg.node_size = 2;
        c = make_comm(label, &cfg, NULL, NULL);
        if (c) {
            expect_ar(c, label, 1000, FR_INT32, "!shm");
            expect_bc(c, label, 1000, "!shm");
        }
        free_comm(label, c);
    }
}

/* Rank 0 writes @p dir/@p name: a v1 header with these fields (a NULL
 * fingerprint or a 0 count leaves the field out), then @p rules. */
static void write_table(const char *dir, const char *name, const char *fp, int nodes, int ppn, const char *rules)
{
    if (me != 0) return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "# fastreduce tuning table v1\n");
    if (fp) fprintf(f, "# fingerprint: %s\n", fp);
    if (nodes) fprintf(f, "# nodes: %d\n", nodes);
    if (ppn) fprintf(f, "# ppn: %d\n", ppn);
    fprintf(f, "# date: 2026-12-03T00:00:00Z\n%s\n", rules);
    fclose(f);
}

/* FASTREDUCE_TUNE_PATH: the first *.tune (by name) whose fingerprint, nodes
 * and ppn are this job's is loaded; other tables are skipped; a file named
 * by FASTREDUCE_TUNE_FILE whose header differs is used with a warning. */
static void test_tune_path(void)
{
    char dir[256] = "", fp[160] = "", other[300];
    fr_comm_t c;
    env_clear();
    c = make_comm("fingerprint", NULL, NULL, NULL);
    if (!c) return;
    snprintf(fp, sizeof fp, "%s", c->fingerprint);
    free_comm("fingerprint", c);
    tu_begin("FASTREDUCE_TUNE_PATH: the job's fingerprint is known");
    if (!TU_CHECK(fp[0] && tu_same_everywhere(tu_hash_bytes(fp, strlen(fp))), "fingerprint '%s'", fp)) return;
    if (me == 0) {
        snprintf(dir, sizeof dir, "/tmp/fr-tune-path-XXXXXX");
        if (!mkdtemp(dir)) dir[0] = '\0';
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    tu_begin("FASTREDUCE_TUNE_PATH: make a folder");
    if (!TU_CHECK(dir[0], "rank 0 could not make a temporary folder")) return;
    snprintf(other, sizeof other, "%s-other", fp);
    /* one node of np ranks: only c.tune and d.tune match; c.tune comes first */
    write_table(dir, "a.tune", other, 1, np, "allreduce host * * * tree");
    write_table(dir, "b.tune", fp, 1, np + 1, "allreduce host * * * tree");
    write_table(dir, "b2.tune", fp, 2, np, "allreduce host * * * tree");
    write_table(dir, "b3.tune", fp, 0, np, "allreduce host * * * tree");   /* no nodes: not picked */
    write_table(dir, "c.tune", fp, 1, np, "allreduce host * * * rabenseifner\nbcast host * * * scatter_allgather");
    write_table(dir, "d.tune", fp, 1, np, "allreduce host * * * ring");
    write_table(dir, "e.txt", fp, 1, np, "allreduce host * * * tree");      /* not a .tune file */
    MPI_Barrier(MPI_COMM_WORLD);

    const char *label = "FASTREDUCE_TUNE_PATH picks c.tune";
    setenv("FASTREDUCE_TUNE_PATH", dir, 1);
    c = make_comm(label, NULL, NULL, NULL);
    if (c) {
        expect_ar(c, label, 100, FR_INT32, "rabenseifner");
        expect_bc(c, label, 100, "scatter_allgather");
    }
    free_comm(label, c);

    char path[700];
    snprintf(path, sizeof path, "/nonexistent-fr-folder:%s", dir);
    label = "FASTREDUCE_TUNE_PATH with a missing folder first";
    setenv("FASTREDUCE_TUNE_PATH", path, 1);
    c = make_comm(label, NULL, NULL, NULL);
    if (c) expect_ar(c, label, 100, FR_INT32, "rabenseifner");
    free_comm(label, c);

    label = "FASTREDUCE_TUNE_PATH empty: no search";
    setenv("FASTREDUCE_TUNE_PATH", "", 1);
    c = make_comm(label, NULL, NULL, NULL);
    if (c) expect_ar(c, label, 100, FR_INT32, "shm");
    free_comm(label, c);

    /* FASTREDUCE_TUNE_FILE wins over the search */
    snprintf(path, sizeof path, "%s/d.tune", dir);
    setenv("FASTREDUCE_TUNE_PATH", dir, 1);
    setenv("FASTREDUCE_TUNE_FILE", path, 1);
    label = "FASTREDUCE_TUNE_FILE over FASTREDUCE_TUNE_PATH";
    c = make_comm(label, NULL, NULL, NULL);
    if (c) expect_ar(c, label, 100, FR_INT32, "ring");
    free_comm(label, c);

    /* a named file measured elsewhere: a warning naming what differs; its rules still apply */
    snprintf(path, sizeof path, "%s/a.tune", dir);
    setenv("FASTREDUCE_TUNE_FILE", path, 1);
    label = "FASTREDUCE_TUNE_FILE of another fingerprint";
    int warned = 0;
    c = make_comm(label, NULL, other, &warned);
    tu_begin("%s: warns naming its fingerprint", label);
    TU_CHECK(warned, "no warning naming '%s'", other);
    if (c) expect_ar(c, label, 100, FR_INT32, "tree");
    free_comm(label, c);

    /* of another shape, with rules for that shape only: warned, and they do not apply */
    write_table(dir, "f.tune", fp, 1, np + 1, "allreduce host 1 99 * tree");
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(path, sizeof path, "%s/f.tune", dir);
    setenv("FASTREDUCE_TUNE_FILE", path, 1);
    label = "FASTREDUCE_TUNE_FILE of another shape";
    warned = 0;
    c = make_comm(label, NULL, "0 of its 1 rules match this job's shape", &warned);
    tu_begin("%s: warns that no rule applies", label);
    TU_CHECK(warned, "no warning that 0 of its 1 rules apply");
    if (c) expect_ar(c, label, 100, FR_INT32, "shm");
    free_comm(label, c);

    /* matching header: no warning */
    snprintf(path, sizeof path, "%s/c.tune", dir);
    setenv("FASTREDUCE_TUNE_FILE", path, 1);
    label = "FASTREDUCE_TUNE_FILE of this job";
    warned = 0;
    c = make_comm(label, NULL, "WARN", &warned);
    tu_begin("%s: no warning", label);
    TU_CHECK(!warned, "a warning was printed");
    free_comm(label, c);
    env_clear();

    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        if (d) closedir(d);
        rmdir(dir);
    }
}

/* Device buffers on a machine without a GPU: the table's cuda rules are
 * what the queries name before NCCL is set up (as if it comes up), integer
 * avg always goes to the staged path, and a communicator asked to set NCCL
 * up at once (nccl_eager) is still created, names the staged path for
 * every device call (NCCL could not come up) and serves host buffers. */
static void test_device_choice(void)
{
    env_clear();
    setenv("FASTREDUCE_TUNE", "allreduce cuda * * 0-1K nccl_tree; allreduce cuda * * 1K-inf nccl_ring proto=ll128", 1);
    fr_comm_t c = make_comm("device queries", NULL, NULL, NULL);
    if (!c) return;
#ifdef FR_HAVE_NCCL
    const char *small = "nccl_tree", *large = "nccl_ring", *bc = "nccl";
#else
    const char *small = "staged", *large = "staged", *bc = "staged";
#endif
    struct { size_t count; fr_dtype_t dt; fr_op_t op; const char *want; } q[] = {
        { 16, FR_FLOAT32, FR_SUM, small }, { 256, FR_FLOAT32, FR_SUM, small }, { 257, FR_FLOAT32, FR_AVG, large },
        { 1u << 20, FR_BFLOAT16, FR_MAX, large }, { 16, FR_INT32, FR_AVG, "staged" }, { 1u << 20, FR_UINT8, FR_AVG, "staged" },
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        tu_begin("device query: allreduce %zu x %s %s", q[i].count, tu_dtype_names[q[i].dt], tu_op_names[q[i].op]);
        const char *got = fr_allreduce_algorithm_device(c, q[i].count, q[i].dt, q[i].op);
        TU_CHECK(got && !strcmp(got, q[i].want), "got %s, want %s", got ? got : "NULL", q[i].want);
        /* the host query on the same communicator is unchanged by the cuda rules */
        got = fr_allreduce_algorithm(c, q[i].count, q[i].dt, q[i].op);
        TU_CHECK(got && strncmp(got, "nccl", 4) && strcmp(got, "staged"), "host query gave %s", got ? got : "NULL");
    }
    tu_begin("device query: bcast");
    const char *got = fr_bcast_algorithm_device(c, 4096, FR_UINT8, np - 1);
    TU_CHECK(got && !strcmp(got, bc), "got %s, want %s", got ? got : "NULL", bc);
    TU_CHECK(!fr_bcast_algorithm_device(c, 4096, FR_UINT8, np), "a root out of range gave a name");
    free_comm("device queries", c);

    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.nccl_eager = 1;
    c = make_comm("nccl_eager without a GPU", &cfg, NULL, NULL);
    if (!c) return;
    tu_begin("nccl_eager without a GPU: device calls take the staged path");
    got = fr_allreduce_algorithm_device(c, 16, FR_FLOAT32, FR_SUM);
    TU_CHECK(got && !strcmp(got, "staged"), "got %s", got ? got : "NULL");
    got = fr_bcast_algorithm_device(c, 16, FR_FLOAT32, 0);
    TU_CHECK(got && !strcmp(got, "staged"), "got %s", got ? got : "NULL");
    expect_ar(c, "nccl_eager without a GPU: host buffer", 1000, FR_INT32, "shm");
    free_comm("nccl_eager without a GPU", c);
    env_clear();
}

/* The label of the choice (what --compare prints) leaves out a chunk equal
 * to the algorithm's default for that call, which for shm bcast depends on
 * the size (256K, 512K from 1 MiB), for shm allreduce too (1M up to 1 MiB,
 * 512K above), and names any other. */
static void test_choice_label(void)
{
    if (np < 2) return;   /* (one rank: nothing to move, shm's check may decline) */
    static const struct { const char *coll, *rule; size_t bytes; const char *want; } q[] = {
        { "bcast", "bcast host * * * shm chunk=256K", 65536, "shm" },
        { "bcast", "bcast host * * * shm chunk=256K", 2u << 20, "shm chunk=256K" },
        { "bcast", "bcast host * * * shm chunk=512K", 65536, "shm chunk=512K" },
        { "bcast", "bcast host * * * shm chunk=512K", 2u << 20, "shm" },
        { "bcast", "bcast host * * * shm", 2u << 20, "shm" },
        { "allreduce", "allreduce host * * * shm chunk=512K", 2u << 20, "shm" },
        { "allreduce", "allreduce host * * * shm chunk=1M", 2u << 20, "shm chunk=1M" },
        { "allreduce", "allreduce host * * * shm chunk=1M", 1u << 20, "shm" },
        { "allreduce", "allreduce host * * * shm chunk=512K", 1u << 20, "shm chunk=512K" },
    };
    env_clear();
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        fr_config_t cfg = FR_CONFIG_INIT;
        cfg.tune = q[i].rule;
        fr_comm_t c = make_comm(q[i].rule, &cfg, NULL, NULL);
        if (!c) continue;
        char label[128] = "";
        const char *got = !strcmp(q[i].coll, "bcast")
                              ? fr_bcast_choice(c, q[i].bytes, FR_UINT8, 0, FR_MEM_HOST, label, sizeof label)
                              : fr_allreduce_choice(c, q[i].bytes / 4, FR_INT32, FR_SUM, FR_MEM_HOST, label,
                                                    sizeof label);
        tu_begin("%s: %s of %zu bytes is labelled %s", q[i].rule, q[i].coll, q[i].bytes, q[i].want);
        TU_CHECK(got && !strcmp(label, q[i].want), "got '%s'", label);
        free_comm(q[i].rule, c);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_select");
    np = tu.size;
    me = tu.rank;
    test_rank_dependent_algo();
    test_tune_inline();
    test_rule_index();
    test_tune_file();
    test_decline();
    test_tune_path();
    test_device_choice();
    test_choice_label();
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
