/* mpi_program: an ordinary MPI program, written against MPI alone, for the
 * interposer's tests (run_mpi.sh runs it plain, with
 * LD_PRELOAD=libfastreduce-mpi.so, and linked with it, and compares the
 * outputs). It allreduces and broadcasts every basic MPI type with the
 * predefined ops and with ones fastreduce passes on (MPI_LAND, MPI_BOR, a
 * user op, MPI_2INT with MPI_MAXLOC, MPI_SHORT, a vector type in bcast), in place and not, at counts that do
 * not divide evenly, on MPI_COMM_WORLD, a dup and two splits, every root,
 * and creates and frees 40 communicators in a loop; and collectives on
 * buffers of MPI_Alloc_mem (fr_mem_alloc's under the interposer). Inputs are small
 * integers, so every order of summation gives the same bits. The rank 0
 * of each communicator prints one line per case: a hash of its result and
 * whether every rank's equals it; rank 0 of MPI_COMM_WORLD prints them all
 * at the end, in rank order (compare sorted outputs: which rank leads a
 * split communicator's cases does not change, their order might).
 *
 * Usage: mpi_program [--errors]
 *   --errors  instead: a served call with a NULL recvbuf on a communicator
 *             with its own error handler; prints what the handler got. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int me, np;
static char *lines;           /* this rank's report lines, printed by rank 0 at the end */
static size_t nlines, caplines;

static void add_line(const char *l)
{
    size_t n = strlen(l);
    if (nlines + n + 1 > caplines) {
        caplines = (nlines + n + 1) * 2;
        lines = realloc(lines, caplines);
    }
    memcpy(lines + nlines, l, n + 1);
    nlines += n;
}

/* Every rank's lines to rank 0 of MPI_COMM_WORLD, which prints them in rank order. */
static void print_lines(void)
{
    int len = (int)nlines, *lens = malloc(sizeof(int) * (size_t)np), *offs = malloc(sizeof(int) * (size_t)np);
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    if (me == 0)
        for (int i = 0; i < np; i++) { offs[i] = total; total += lens[i]; }
    char *all = me == 0 ? malloc((size_t)total + 1) : NULL;
    MPI_Gatherv(lines ? lines : "", len, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (me == 0) fwrite(all, 1, (size_t)total, stdout);
    free(all);
    free(lens);
    free(offs);
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Rank 0 prints the case with its hash and whether all ranks of @p comm agree. */
static void report(const char *name, MPI_Comm comm, const void *buf, size_t bytes, int err)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    uint64_t h = err == MPI_SUCCESS ? fnv(buf, bytes) : (uint64_t)err, *all = malloc(sizeof h * (size_t)n);
    MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, comm);
    if (r == 0) {
        int same = 1;
        char line[256];
        for (int i = 1; i < n; i++) same &= all[i] == all[0];
        snprintf(line, sizeof line, "%-60s %s %016llx %s\n", name, err == MPI_SUCCESS ? "ok" : "ERROR",
                 (unsigned long long)h, same ? "same on all ranks" : "RANKS DIFFER");
        add_line(line);
    }
    free(all);
}

struct type { MPI_Datatype t; const char *name; int size; int is_float; int sgn; };

static void set(void *buf, int i, const struct type *ty, long v)
{
    switch (ty->size) {
    case 1: ((int8_t *)buf)[i] = (int8_t)v; break;
    case 2: ((int16_t *)buf)[i] = (int16_t)v; break;
    case 4: if (ty->is_float) ((float *)buf)[i] = (float)v; else ((int32_t *)buf)[i] = (int32_t)v; break;
    default: if (ty->is_float) ((double *)buf)[i] = (double)v; else ((int64_t *)buf)[i] = v; break;
    }
}

/* rank r's input at i for op o: small, so that sums and products neither
 * overflow nor wrap in any type (where MPI libraries are known to saturate
 * 8-bit sums, Open MPI 4.1), and negative only in signed types (MPICH 4.0
 * compares unsigned extremes as signed) */
static long input(int o, int r, int i, const struct type *ty)
{
    if (o == 1) return (i + r) % 3 == 0 ? 2 : 1;           /* prod: at most 2^(np) */
    if (o == 4) return (i * 7 + r) % 2;                     /* bitwise: 0 or 1 */
    long v = (long)((i * 31 + r * 17) % 97);
    if (ty->size == 1) v %= 8;
    if (o >= 2 && ty->sgn) v -= ty->size == 1 ? 4 : 40;     /* min, max: negative values too */
    return v;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void allreduce_cases(MPI_Comm comm, const char *cname)
{
    static const struct type types[] = {
        { MPI_INT, "MPI_INT", sizeof(int), 0, 1 }, { MPI_UNSIGNED, "MPI_UNSIGNED", sizeof(unsigned), 0, 0 },
        { MPI_LONG, "MPI_LONG", sizeof(long), 0, 1 }, { MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", sizeof(long), 0, 0 },
        { MPI_LONG_LONG, "MPI_LONG_LONG", 8, 0, 1 }, { MPI_FLOAT, "MPI_FLOAT", 4, 1, 1 },
        { MPI_DOUBLE, "MPI_DOUBLE", 8, 1, 1 }, { MPI_INT8_T, "MPI_INT8_T", 1, 0, 1 },
        { MPI_UINT8_T, "MPI_UINT8_T", 1, 0, 0 }, { MPI_INT32_T, "MPI_INT32_T", 4, 0, 1 },
        { MPI_UINT32_T, "MPI_UINT32_T", 4, 0, 0 }, { MPI_INT64_T, "MPI_INT64_T", 8, 0, 1 },
        { MPI_UINT64_T, "MPI_UINT64_T", 8, 0, 0 }, { MPI_SHORT, "MPI_SHORT", 2, 0, 1 },
        { MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, 0, 1 }, { MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, 0, 0 },
        { MPI_CHAR, "MPI_CHAR", 1, 0, CHAR_MIN < 0 },
    };
    static const MPI_Op ops[] = { MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BOR };
    static const char *const opn[] = { "SUM", "PROD", "MIN", "MAX", "BOR" };
    static const int counts[] = { 0, 1, 7, 1000, 100003 };
    int r;
    MPI_Comm_rank(comm, &r);
    char name[128];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int o = 0; o < 5; o++) {
            if (o == 4 && types[t].is_float) continue;  /* MPI defines no bitwise op on floats */
            if (o == 4 && types[t].t == MPI_CHAR) continue;  /* nor any op on MPI_CHAR (both MPIs take these) */
            for (int c = 0; c < 5; c++) {
                int n = counts[c];
                size_t bytes = (size_t)n * (size_t)types[t].size;
                char *s = malloc(bytes + 1), *d = malloc(bytes + 1);
                for (int inplace = 0; inplace < 2; inplace++) {
                    for (int i = 0; i < n; i++) set(inplace ? d : s, i, &types[t], input(o, r, i, &types[t]));
                    int err = MPI_Allreduce(inplace ? MPI_IN_PLACE : s, d, n, types[t].t, ops[o], comm);
                    snprintf(name, sizeof name, "allreduce %s %s %s n=%d%s", cname, types[t].name, opn[o], n,
                             inplace ? " in place" : "");
                    report(name, comm, d, bytes, err);
                }
                free(s);
                free(d);
            }
        }
    /* what fastreduce passes on: a user op, a derived type, MPI_LAND */
    int n = 1001, *a = malloc(sizeof(int) * 3 * (size_t)n), *b = malloc(sizeof(int) * 3 * (size_t)n);
    for (int i = 0; i < 3 * n; i++) a[i] = (i + r) % 5;
    MPI_Op uop;
    MPI_Op_create(user_sum, 1, &uop);
    snprintf(name, sizeof name, "allreduce %s MPI_INT user op n=%d", cname, n);
    report(name, comm, b, sizeof(int) * (size_t)n, MPI_Allreduce(a, b, n, MPI_INT, uop, comm));
    MPI_Op_free(&uop);
    snprintf(name, sizeof name, "allreduce %s MPI_INT LAND n=%d", cname, n);
    report(name, comm, b, sizeof(int) * (size_t)n, MPI_Allreduce(a, b, n, MPI_INT, MPI_LAND, comm));
    /* (a derived datatype: MPI_MAXLOC on MPI_2INT, pairs of (value, index)) */
    for (int i = 0; i < n; i++) a[2 * i + 1] = r;
    snprintf(name, sizeof name, "allreduce %s MPI_2INT MAXLOC n=%d", cname, n);
    report(name, comm, b, sizeof(int) * 2 * (size_t)n, MPI_Allreduce(a, b, n, MPI_2INT, MPI_MAXLOC, comm));
    free(a);
    free(b);
}

static void bcast_cases(MPI_Comm comm, const char *cname)
{
    static const MPI_Datatype types[] = { MPI_CHAR, MPI_INT, MPI_DOUBLE, MPI_SHORT, MPI_UINT64_T };
    static const char *const tn[] = { "MPI_CHAR", "MPI_INT", "MPI_DOUBLE", "MPI_SHORT", "MPI_UINT64_T" };
    static const int counts[] = { 0, 1, 7, 1000, 100003 };
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    char name[128];
    for (int t = 0; t < 5; t++)
        for (int c = 0; c < 5; c++)
            for (int root = 0; root < n; root++) {
                int size;
                MPI_Type_size(types[t], &size);
                size_t bytes = (size_t)counts[c] * (size_t)size;
                unsigned char *b = malloc(bytes + 1);
                for (size_t i = 0; i < bytes; i++) b[i] = r == root ? (unsigned char)(i * 13 + root) : 0xEE;
                int err = MPI_Bcast(b, counts[c], types[t], root, comm);
                snprintf(name, sizeof name, "bcast %s %s n=%d root=%d", cname, tn[t], counts[c], root);
                report(name, comm, b, bytes, err);
                free(b);
            }
    /* a derived type: every other int of 2000 */
    MPI_Datatype vec;
    MPI_Type_vector(1000, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *v = malloc(sizeof(int) * 2000);
    for (int i = 0; i < 2000; i++) v[i] = r == 0 || i % 2 ? i : -1;  /* (the gaps are not sent) */
    snprintf(name, sizeof name, "bcast %s vector(1000, 1, 2, MPI_INT) root=0", cname);
    report(name, comm, v, sizeof(int) * 2000, MPI_Bcast(v, 1, vec, 0, comm));
    MPI_Type_free(&vec);
    free(v);
}

static int handler_class = -1;
/* Collectives on memory of MPI_Alloc_mem, which the interposer takes from
 * fr_mem_alloc (zero-copy): allreduce in place and not, bcast from every
 * root, at sizes above the zero-copy thresholds. */
static void alloc_mem_cases(void)
{
    const int n = 300007;
    int *s = NULL, *r = NULL;
    if (MPI_Alloc_mem((MPI_Aint)n * (MPI_Aint)sizeof(int), MPI_INFO_NULL, &s) != MPI_SUCCESS ||
        MPI_Alloc_mem((MPI_Aint)n * (MPI_Aint)sizeof(int), MPI_INFO_NULL, &r) != MPI_SUCCESS) {
        report("MPI_Alloc_mem", MPI_COMM_WORLD, NULL, 0, MPI_ERR_NO_MEM);
        return;
    }
    char name[96];
    for (int i = 0; i < n; i++) s[i] = (i % 1000) * (me + 1) - me;
    int err = MPI_Allreduce(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    report("allreduce of MPI_Alloc_mem buffers", MPI_COMM_WORLD, r, (size_t)n * sizeof(int), err);
    err = MPI_Allreduce(MPI_IN_PLACE, s, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    report("allreduce in place of an MPI_Alloc_mem buffer", MPI_COMM_WORLD, s, (size_t)n * sizeof(int), err);
    for (int root = 0; root < np; root++) {
        for (int i = 0; i < n; i++) r[i] = me == root ? i * 7 + root : -1;
        err = MPI_Bcast(r, n, MPI_INT, root, MPI_COMM_WORLD);
        snprintf(name, sizeof name, "bcast of an MPI_Alloc_mem buffer from root %d", root);
        report(name, MPI_COMM_WORLD, r, (size_t)n * sizeof(int), err);
    }
    MPI_Free_mem(s);
    MPI_Free_mem(r);
}

/* Many MPI_Alloc_mem under a limit of 256 open files, and a small one:
 * fastreduce serves neither a size under 4 KiB nor more than half the
 * limit, which each of its allocations (a descriptor) counts against, so
 * all 300 succeed and the program can still open a file. */
static void alloc_mem_many(void)
{
    enum { N = 300 };
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    low = old;
    if (low.rlim_cur > 256) low.rlim_cur = 256;
    setrlimit(RLIMIT_NOFILE, &low);
    void *p[N], *small = NULL;
    int err = MPI_Alloc_mem(16, MPI_INFO_NULL, &small), k = 0;
    for (; err == MPI_SUCCESS && k < N; k++) err = MPI_Alloc_mem(65536, MPI_INFO_NULL, &p[k]);
    if (err != MPI_SUCCESS) k--;
    FILE *f = fopen("/dev/null", "r");
    if (err == MPI_SUCCESS && !f) err = MPI_ERR_OTHER;
    if (f) fclose(f);
    while (k > 0) MPI_Free_mem(p[--k]);
    if (small) MPI_Free_mem(small);
    setrlimit(RLIMIT_NOFILE, &old);
    report("300 MPI_Alloc_mem of 64 KiB and one of 16 B, 256 open files, then fopen", MPI_COMM_WORLD, NULL, 0, err);
}

static void on_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    MPI_Error_class(*code, &handler_class);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc > 1 && !strcmp(argv[1], "--errors")) {
        MPI_Comm c;
        MPI_Errhandler eh;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_create_errhandler(on_error, &eh);
        MPI_Comm_set_errhandler(c, eh);
        int s[4] = { 1, 2, 3, 4 };
        int err = MPI_Allreduce(s, NULL, 4, MPI_INT, MPI_SUM, c), cls = -1;
        MPI_Error_class(err, &cls);
        if (me == 0)
            printf("errors: MPI_Allreduce with a NULL recvbuf returned class %d (MPI_ERR_BUFFER is %d); the error "
                   "handler saw class %d\n", cls, MPI_ERR_BUFFER, handler_class);
        MPI_Errhandler_free(&eh);
        MPI_Comm_free(&c);
        MPI_Finalize();
        return 0;
    }
    allreduce_cases(MPI_COMM_WORLD, "world");
    bcast_cases(MPI_COMM_WORLD, "world");
    alloc_mem_cases();
    alloc_mem_many();
    MPI_Comm dup, halves, pairs;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, np - me, &halves);   /* reversed order */
    MPI_Comm_split(MPI_COMM_WORLD, me / 2, me, &pairs);
    allreduce_cases(dup, "dup");
    bcast_cases(halves, me % 2 ? "odd" : "even");
    allreduce_cases(pairs, "pairs");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&halves);
    MPI_Comm_free(&pairs);
    /* communicators made and freed in a loop: nothing may pile up */
    long sum = 0;
    for (int k = 0; k < 40; k++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        long one = k + me, got = 0;
        MPI_Allreduce(&one, &got, 1, MPI_LONG, MPI_SUM, c);
        sum += got;
        MPI_Comm_free(&c);
    }
    report("allreduce in 40 communicators made and freed in turn", MPI_COMM_WORLD, &sum, sizeof sum, MPI_SUCCESS);
    print_lines();
    free(lines);
    MPI_Finalize();
    return 0;
}
