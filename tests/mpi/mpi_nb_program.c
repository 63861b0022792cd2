/* mpi_nb_program: an ordinary MPI program, written against MPI alone, that
 * mixes non-blocking collectives with everything around them, for the
 * interposer's tests (run_mpi.sh runs it with LD_PRELOAD=libfastreduce-mpi.so
 * at MPI_THREAD_SINGLE and MPI_THREAD_MULTIPLE, and reads its
 * FASTREDUCE_STATS). MPI_Iallreduce (several types, ops, counts, in place
 * and not, and a user op that fastreduce passes on) and MPI_Ibcast (every
 * root; a derived type, and ranks naming different datatypes of one
 * signature) are completed with MPI_Wait, MPI_Test loops, MPI_Waitall and
 * MPI_Testall, batches mixing them with point-to-point requests, blocking
 * MPI_Allreduce and MPI_Bcast started in between, on MPI_COMM_WORLD, a dup
 * and a split; and a communicator or a datatype freed before the request
 * on it completes, and a rank that tests its request until it is done
 * before sending what another rank receives before waiting; a first,
 * non-blocking call on a communicator that rank 0 follows with a send
 * that rank 1 receives before its own start; a communicator freed with an
 * MPI_Ibarrier pending on some ranks (MPICH only); at
 * MPI_THREAD_MULTIPLE, two threads each starting and completing requests
 * on a communicator of its own at once. Every result is checked against
 * what the rank works out alone from the inputs.
 *
 * Usage: mpi_nb_program single|multiple [--free-pending | --free-tested | --errors | --fail]
 *   --free-pending  also free a communicator with a request pending on it
 *             (which MPI allows, but Open MPI 4.1's own MPI_Iallreduce
 *             then crashes in MPI_Wait: only where the call is served)
 *   --free-tested  also, at MPI_THREAD_MULTIPLE: 40 times, a thread tests a
 *             request while the main thread frees its communicator and
 *             makes the next (each new communicator's set-up is many
 *             collectives: with more ranks than cores, MPICH's busy waits
 *             make that part take tens of seconds, which is slow, not
 *             stuck)
 *   --errors  instead: an MPI_Iallreduce with a NULL recvbuf on a
 *             communicator with its own error handler
 *   --fail    instead: rank 0 alone starts an MPI_Iallreduce (run it with
 *             FASTREDUCE_TIMEOUT set); MPI_COMM_WORLD's errors return
 * Prints "mpi_nb_program <level> np=N: P passed, F failed" (rank 0), each
 * failure on its own line; exit status 1 when any failed. */
#define _GNU_SOURCE   /* pthread_setattr_default_np */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int me, np, passed, failed;

static void check(int ok, const char *what, MPI_Comm comm)
{
    int r;
    MPI_Comm_rank(comm, &r);
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL rank %d (rank %d here): %s\n", me, r, what);
        fflush(stdout);
    }
}

/* ---- the element types, read and written as doubles ---------------------- */
enum { T_INT, T_DOUBLE, T_FLOAT, T_LONG_LONG, T_UINT8, NTYPES };
static const char *const tname[NTYPES] = { "MPI_INT", "MPI_DOUBLE", "MPI_FLOAT", "MPI_LONG_LONG", "MPI_UINT8_T" };
static MPI_Datatype mtype(int t)
{
    const MPI_Datatype m[NTYPES] = { MPI_INT, MPI_DOUBLE, MPI_FLOAT, MPI_LONG_LONG, MPI_UINT8_T };
    return m[t];
}
static size_t tsize(int t)
{
    const size_t s[NTYPES] = { sizeof(int), sizeof(double), sizeof(float), sizeof(long long), 1 };
    return s[t];
}
static void put(void *b, size_t i, int t, double v)
{
    switch (t) {
    case T_INT: ((int *)b)[i] = (int)v; break;
    case T_DOUBLE: ((double *)b)[i] = v; break;
    case T_FLOAT: ((float *)b)[i] = (float)v; break;
    case T_LONG_LONG: ((long long *)b)[i] = (long long)v; break;
    default: ((uint8_t *)b)[i] = (uint8_t)v; break;
    }
}
static double get(const void *b, size_t i, int t)
{
    switch (t) {
    case T_INT: return ((const int *)b)[i];
    case T_DOUBLE: return ((const double *)b)[i];
    case T_FLOAT: return ((const float *)b)[i];
    case T_LONG_LONG: return (double)((const long long *)b)[i];
    default: return ((const uint8_t *)b)[i];
    }
}

/* Rank r's input at i: small integers, so every order of summing gives the
 * same bits; never negative in the unsigned type. */
static double input(int r, size_t i, int t)
{
    double v = (double)((i * 7 + (size_t)r * 13) % 31);
    return t == T_UINT8 ? v : v - 10;
}

enum { O_SUM, O_MIN, O_MAX, O_USER, NOPS };
static const char *const oname[NOPS] = { "SUM", "MIN", "MAX", "user op" };
static MPI_Op user_op;

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* What the ranks of @p comm (by their ranks in MPI_COMM_WORLD) reduce to at i. */
static double expect(MPI_Comm comm, size_t i, int t, int o)
{
    int n;
    MPI_Group g, wg;
    MPI_Comm_size(comm, &n);
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    double acc = 0;
    for (int k = 0; k < n; k++) {
        int w;
        MPI_Group_translate_ranks(g, 1, &k, wg, &w);
        double v = input(w, i, t);
        acc = k == 0 ? v : o == O_MIN ? (v < acc ? v : acc) : o == O_MAX ? (v > acc ? v : acc) : acc + v;
    }
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    return acc;
}

/* ---- requests pending, each with what to check once complete -------------- */
#define MAXP 16
typedef struct pend {
    int      bcast, p2p, t, o, root, n;   /* p2p: 1 a receive, 2 a send */
    MPI_Comm comm;
    void    *buf, *in;
    char     name[128];
} pend_t;
static pend_t pend[MAXP];
static MPI_Request reqs[MAXP];
static int npend;

static void start_allreduce(MPI_Comm comm, const char *cname, int t, int o, int n, int inplace)
{
    pend_t *p = &pend[npend];
    int r;
    MPI_Comm_rank(comm, &r);
    *p = (pend_t){ .t = t, .o = o, .n = n, .comm = comm };
    p->buf = malloc((size_t)n * tsize(t) + 1);
    p->in = inplace ? NULL : malloc((size_t)n * tsize(t) + 1);
    int w;
    MPI_Comm_rank(MPI_COMM_WORLD, &w);
    for (int i = 0; i < n; i++) put(inplace ? p->buf : p->in, (size_t)i, t, input(w, (size_t)i, t));
    snprintf(p->name, sizeof p->name, "iallreduce %s %s %s n=%d%s", cname, tname[t], oname[o], n,
             inplace ? " in place" : "");
    MPI_Op op = o == O_SUM ? MPI_SUM : o == O_MIN ? MPI_MIN : o == O_MAX ? MPI_MAX : user_op;
    int err = MPI_Iallreduce(inplace ? MPI_IN_PLACE : p->in, p->buf, n, mtype(t), op, comm, &reqs[npend]);
    check(err == MPI_SUCCESS, p->name, comm);
    npend++;
}

/* root's bytes of a bcast: a pattern of the root and the index */
static unsigned char pattern(int root, size_t i) { return (unsigned char)(i * 13 + (size_t)root * 5 + 1); }

static void start_bcast(MPI_Comm comm, const char *cname, int t, int n, int root)
{
    pend_t *p = &pend[npend];
    int r;
    MPI_Comm_rank(comm, &r);
    *p = (pend_t){ .bcast = 1, .t = t, .root = root, .n = n, .comm = comm };
    size_t bytes = (size_t)n * tsize(t);
    p->buf = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++) ((unsigned char *)p->buf)[i] = r == root ? pattern(root, i) : 0xEE;
    snprintf(p->name, sizeof p->name, "ibcast %s %s n=%d root=%d", cname, tname[t], n, root);
    check(MPI_Ibcast(p->buf, n, mtype(t), root, comm, &reqs[npend]) == MPI_SUCCESS, p->name, comm);
    npend++;
}

/* A point-to-point pair among the requests: a receive from the rank before
 * and a send to the one after (one int each, the sender's world rank). */
static void start_p2p(MPI_Comm comm)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    for (int k = 1; k <= 2; k++) {
        pend_t *p = &pend[npend];
        *p = (pend_t){ .p2p = k, .comm = comm, .buf = malloc(sizeof(int)), .root = (r + n - 1) % n };
        *(int *)p->buf = me;
        snprintf(p->name, sizeof p->name, "point-to-point %s among the requests", k == 1 ? "receive" : "send");
        int err = k == 1 ? MPI_Irecv(p->buf, 1, MPI_INT, (r + n - 1) % n, 7, comm, &reqs[npend])
                         : MPI_Isend(p->buf, 1, MPI_INT, (r + 1) % n, 7, comm, &reqs[npend]);
        check(err == MPI_SUCCESS, p->name, comm);
        npend++;
    }
}

/* The MPI_COMM_WORLD rank of rank @p r of @p comm. */
static int world_rank(MPI_Comm comm, int r)
{
    int w;
    MPI_Group g, wg;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, 1, &r, wg, &w);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    return w;
}

static void verify(pend_t *p)
{
    int ok = 1;
    if (p->p2p) {
        ok = p->p2p == 2 || *(int *)p->buf == world_rank(p->comm, p->root);
    } else if (p->bcast) {
        for (size_t i = 0; i < (size_t)p->n * tsize(p->t); i++) ok &= ((unsigned char *)p->buf)[i] == pattern(p->root, i);
    } else {
        for (int i = 0; i < p->n && ok; i++) ok &= get(p->buf, (size_t)i, p->t) == expect(p->comm, (size_t)i, p->t, p->o);
    }
    check(ok, p->name, p->comm);
    free(p->buf);
    free(p->in);
}

enum { S_WAIT, S_TEST, S_WAITALL, S_TESTALL, S_GET_STATUS, NSTYLES };
static const char *const sname[NSTYLES] = { "MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Testall",
                                            "MPI_Request_get_status" };

/* Complete every pending request the way @p style says, then check each. */
static void complete(int style)
{
    char what[160];
    int ok = 1, flag = 0;
    MPI_Status st, sts[MAXP];
    switch (style) {
    case S_WAIT:
        for (int i = 0; i < npend; i++) ok &= MPI_Wait(&reqs[i], &st) == MPI_SUCCESS;
        break;
    case S_TEST:
        for (int i = 0; i < npend; i++, flag = 0)
            while (!flag) ok &= MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        break;
    case S_WAITALL:
        ok &= MPI_Waitall(npend, reqs, sts) == MPI_SUCCESS;
        break;
    case S_TESTALL:
        while (!flag) ok &= MPI_Testall(npend, reqs, &flag, sts) == MPI_SUCCESS;
        break;
    default:   /* polled until done without completing it, then freed by MPI_Wait */
        for (int i = 0; i < npend; i++, flag = 0) {
            while (!flag) ok &= MPI_Request_get_status(reqs[i], &flag, &st) == MPI_SUCCESS;
            ok &= reqs[i] != MPI_REQUEST_NULL && MPI_Wait(&reqs[i], &st) == MPI_SUCCESS;
        }
        break;
    }
    for (int i = 0; i < npend; i++) ok &= reqs[i] == MPI_REQUEST_NULL;
    snprintf(what, sizeof what, "%s of %d requests (first: %s)", sname[style], npend, npend ? pend[0].name : "-");
    check(ok, what, npend ? pend[0].comm : MPI_COMM_WORLD);
    for (int i = 0; i < npend; i++) verify(&pend[i]);
    npend = 0;
}

/* The sum of the MPI_COMM_WORLD ranks of @p comm's ranks. */
static long long world_sum(MPI_Comm comm)
{
    int n;
    long long sum = 0;
    MPI_Group g, wg;
    MPI_Comm_size(comm, &n);
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    for (int k = 0; k < n; k++) {
        int w;
        MPI_Group_translate_ranks(g, 1, &k, wg, &w);
        sum += w;
    }
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    return sum;
}

/* A blocking allreduce and bcast on @p comm while requests are pending on
 * it: they run after those (which every rank started first). */
static void blocking_between(MPI_Comm comm, const char *cname)
{
    int n, r;
    char what[128];
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    long long v[3] = { me, 1, -2LL * me }, s[3];
    int err = MPI_Allreduce(v, s, 3, MPI_LONG_LONG, MPI_SUM, comm);
    snprintf(what, sizeof what, "blocking MPI_Allreduce on %s between requests", cname);
    check(err == MPI_SUCCESS && s[0] == world_sum(comm) && s[1] == n && s[2] == -2 * world_sum(comm), what, comm);
    double d[5];
    for (int i = 0; i < 5; i++) d[i] = r == n - 1 ? i * 1.5 : -1;
    err = MPI_Bcast(d, 5, MPI_DOUBLE, n - 1, comm);
    int ok = err == MPI_SUCCESS;
    for (int i = 0; i < 5; i++) ok &= d[i] == i * 1.5;
    snprintf(what, sizeof what, "blocking MPI_Bcast on %s between requests", cname);
    check(ok, what, comm);
}

/* Every type, op and count of allreduce and every root of bcast on
 * @p comm, in batches of a few requests: each batch completed the next
 * way (from MPI_Waitall on, with a point-to-point pair among them), every
 * other one with blocking calls between its start and its completion. */
static void rounds(MPI_Comm comm, const char *cname)
{
    static const int counts[] = { 0, 1, 7, 1000, 65537 };
    const int nc = (int)(sizeof counts / sizeof counts[0]);
    int n, batch = 0;
    MPI_Comm_size(comm, &n);
    for (int t = 0, k = 0; t < NTYPES; t++)
        for (int o = 0; o < NOPS; o++)
            for (int c = 0; c < nc && (o != O_USER || t == T_INT); c++, k++) {
                start_allreduce(comm, cname, t, o, counts[c], k % 2);
                if (npend < 3 && !(t == NTYPES - 1 && o == NOPS - 1 && c == nc - 1)) continue;
                if (batch % 2) blocking_between(comm, cname);
                if (batch % NSTYLES >= S_WAITALL) start_p2p(comm);
                complete(batch++ % NSTYLES);
            }
    static const int btypes[] = { T_INT, T_DOUBLE, T_UINT8 };
    for (int t = 0; t < 3; t++)
        for (int c = 0; c < nc; c++) {
            for (int root = 0; root < n; root++) start_bcast(comm, cname, btypes[t], counts[c], root);
            if (batch % 2) blocking_between(comm, cname);
            if (batch % NSTYLES >= S_WAITALL) start_p2p(comm);
            complete(batch++ % NSTYLES);
        }
}

/* MPI_Ibcast of a datatype with gaps (every other int), freed by the
 * program before the request completes; and ranks naming different
 * datatypes of one signature (MPI_INT x 4n at the root, a contiguous type
 * of 4 ints x n elsewhere). */
static void bcast_datatypes(MPI_Comm comm, int root)
{
    int r;
    MPI_Comm_rank(comm, &r);
    MPI_Datatype vec, four;
    MPI_Type_vector(1000, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *v = malloc(sizeof(int) * 2000), ok = 1;
    /* (the odd ints are the gaps: not sent, so the others set them alike) */
    for (int i = 0; i < 2000; i++) v[i] = r == root || i % 2 ? i * 3 + root : -1;
    MPI_Request q;
    ok &= MPI_Ibcast(v, 1, vec, root, comm, &q) == MPI_SUCCESS;
    MPI_Type_free(&vec);
    ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    for (int i = 0; i < 2000; i++) ok &= v[i] == i * 3 + root;
    check(ok, "ibcast vector(1000, 1, 2, MPI_INT), the type freed before MPI_Wait", comm);
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    for (int i = 0; i < 2000; i++) v[i] = r == root ? i - 7 : 0;
    ok = MPI_Ibcast(v, r == root ? 2000 : 500, r == root ? MPI_INT : four, root, comm, &q) == MPI_SUCCESS;
    ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    for (int i = 0; i < 2000; i++) ok &= v[i] == i - 7;
    check(ok, "ibcast MPI_INT x 2000 at the root, contiguous(4, MPI_INT) x 500 elsewhere", comm);
    MPI_Type_free(&four);
    free(v);
}

/* A blocking collective, first on a new communicator: the interposer sets
 * a communicator up (collectively) in a blocking call only, so the
 * non-blocking calls after it are served. */
static void set_up(MPI_Comm c)
{
    int x = 1, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, c);
}

/* The first collective on a new communicator is non-blocking, and rank 0
 * sends to rank 1 between its start and its wait, which rank 1 receives
 * before it starts its own: the start must not wait for the other ranks
 * (the interposer passes it to MPI, as the communicator is not set up). */
static void first_call_nonblocking(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int v[256], token = 0, ok = 1;
    for (int i = 0; i < 256; i++) v[i] = me == 0 ? i * 3 + 1 : -1;
    MPI_Request q;
    if (me == 1) ok &= MPI_Recv(&token, 1, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    ok &= MPI_Ibcast(v, 256, MPI_INT, 0, c, &q) == MPI_SUCCESS;
    if (me == 0 && np > 1) ok &= MPI_Send(&token, 1, MPI_INT, 1, 11, MPI_COMM_WORLD) == MPI_SUCCESS;
    ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    for (int i = 0; i < 256; i++) ok &= v[i] == i * 3 + 1;
    check(ok, "a first, non-blocking bcast on a communicator, rank 0 sending to rank 1 before its wait", c);
    MPI_Comm_free(&c);
}

#ifdef MPICH_VERSION
/* A set-up communicator freed while an MPI_Ibarrier (MPI's own) on it is
 * complete on rank 0 and pending elsewhere, then a barrier on
 * MPI_COMM_WORLD before the wait: the cached communicator must go inside
 * the free on every rank, not when MPI drops its last reference. */
static void free_with_ibarrier(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set_up(c);
    MPI_Request q;
    int done = 0, ok = MPI_Ibarrier(c, &q) == MPI_SUCCESS;
    if (me == 0)
        while (ok && !done) ok &= MPI_Test(&q, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    ok &= MPI_Comm_free(&c) == MPI_SUCCESS;
    ok &= MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS;
    ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    check(ok, "a communicator freed with an MPI_Ibarrier pending on some ranks, a barrier before its wait",
          MPI_COMM_WORLD);
}
#endif

/* A communicator freed while an MPI_Iallreduce on it is pending (ranks at
 * different times): the request completes, with the right result. */
static void free_before_wait(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set_up(c);
    double d[100], want = 0;
    for (int k = 0; k < np; k++) want += k + 0.5;
    for (int i = 0; i < 100; i++) d[i] = me + 0.5;
    MPI_Request q;
    int ok = MPI_Iallreduce(MPI_IN_PLACE, d, 100, MPI_DOUBLE, MPI_SUM, c, &q) == MPI_SUCCESS;
    if (me % 2) usleep(20000);
    ok &= MPI_Comm_free(&c) == MPI_SUCCESS;
    ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    for (int i = 0; i < 100; i++) ok &= d[i] == want;
    check(ok, "iallreduce on a communicator freed before MPI_Wait", MPI_COMM_WORLD);
}

/* A thread of the program's own: an explicit stack size, so that it is
 * made under FR_TEST_NO_THREADS too. */
static void spawn(pthread_t *tid, void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, (size_t)8 << 20);
    if (pthread_create(tid, &a, fn, arg)) {
        fprintf(stderr, "mpi_nb_program: pthread_create failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    pthread_attr_destroy(&a);
}

/* FR_TEST_NO_THREADS=1: a thread made from here on with the default
 * attributes fails on this rank (its stack would be 2^46 bytes), as the
 * library's progress thread then does; MPI made its own threads already. */
static void threads_fail_here(void)
{
    const char *v = getenv("FR_TEST_NO_THREADS");
    if (!v || strcmp(v, "1")) return;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, (size_t)1 << 46);
    pthread_setattr_default_np(&a);
    pthread_attr_destroy(&a);
}

/* At MPI_THREAD_MULTIPLE: another thread tests the request in a loop while
 * the main thread frees its communicator, ranks at different moments. A
 * rank whose other thread is inside MPI_Test at the free must still go
 * through it, as the other ranks wait for it there. */
typedef struct {
    MPI_Request *q;
    int ok;
} tester_t;

static void *test_until_done(void *arg)
{
    tester_t *t = arg;
    int flag = 0;
    while (t->ok && !flag) t->ok &= MPI_Test(t->q, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    return NULL;
}

static void free_while_tested(void)
{
    int ok = 1;
    double want = 0, d[3000];
    for (int k = 0; k < np; k++) want += k + 0.25;
    for (int it = 0; it < 40; it++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        set_up(c);
        for (int i = 0; i < 3000; i++) d[i] = me + 0.25 + i;
        MPI_Request q;
        tester_t t = { &q, MPI_Iallreduce(MPI_IN_PLACE, d, 3000, MPI_DOUBLE, MPI_SUM, c, &q) == MPI_SUCCESS };
        pthread_t tid;
        spawn(&tid, test_until_done, &t);
        if ((me + it) % 2) usleep((useconds_t)(it % 4) * 50);
        ok &= MPI_Comm_free(&c) == MPI_SUCCESS;
        pthread_join(tid, NULL);
        ok &= t.ok;
        for (int i = 0; i < 3000; i++) ok &= d[i] == want + (double)np * i;
    }
    check(ok, "40 iallreduces tested by another thread while their communicator is freed", MPI_COMM_WORLD);
    if (me == 0) printf("free-tested: 40 communicators freed while another thread tested their request\n");
}

/* Rank 0 tests its request until it completes and only then sends to rank
 * 1, which receives before it waits for its own: MPI_Test must complete
 * the request without rank 1 calling into MPI for it meanwhile. */
static void test_before_send(void)
{
    int x[64], token = 0, flag = 0, ok = 1;
    for (int i = 0; i < 64; i++) x[i] = me + i;
    MPI_Request q;
    ok &= MPI_Iallreduce(MPI_IN_PLACE, x, 64, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &q) == MPI_SUCCESS;
    if (me == 0) {
        while (!flag) ok &= MPI_Test(&q, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        token = 42;
        if (np > 1) ok &= MPI_Send(&token, 1, MPI_INT, 1, 9, MPI_COMM_WORLD) == MPI_SUCCESS;
    } else {
        if (me == 1) ok &= MPI_Recv(&token, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    }
    for (int i = 0; i < 64; i++) ok &= x[i] == np - 1 + i;
    check(ok && (me > 1 || token == 42), "rank 0 completes its iallreduce with MPI_Test before sending to rank 1",
          MPI_COMM_WORLD);
}

/* A thread of threads_at_once(): its communicator and its count of failures. */
typedef struct worker {
    MPI_Comm comm;
    int      k, bad;
} worker_t;

static void *work(void *arg)
{
    worker_t *t = arg;
    int x[1000];
    for (int it = 0; it < 30; it++) {
        for (int i = 0; i < 1000; i++) x[i] = me * (t->k + 1) + i + it;
        MPI_Request q;
        int flag = 0, ok = MPI_Iallreduce(MPI_IN_PLACE, x, 1000, MPI_INT, MPI_SUM, t->comm, &q) == MPI_SUCCESS;
        if (it % 2) ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        else while (ok && !flag) ok &= MPI_Test(&q, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        for (int i = 0; i < 1000; i++) ok &= x[i] == (t->k + 1) * np * (np - 1) / 2 + np * (i + it);
        t->bad += !ok;
    }
    return NULL;
}

/* Two threads at once, each with requests on a communicator of its own. */
static void threads_at_once(void)
{
    worker_t w[2];
    pthread_t tid[2];
    for (int k = 0; k < 2; k++) {
        w[k] = (worker_t){ .k = k };
        MPI_Comm_dup(MPI_COMM_WORLD, &w[k].comm);
        set_up(w[k].comm);
    }
    for (int k = 0; k < 2; k++) spawn(&tid[k], work, &w[k]);
    for (int k = 0; k < 2; k++) {
        char what[96];
        pthread_join(tid[k], NULL);
        snprintf(what, sizeof what, "thread %d: 30 iallreduces on its own communicator, %d wrong", k, w[k].bad);
        check(!w[k].bad, what, MPI_COMM_WORLD);
        MPI_Comm_free(&w[k].comm);
    }
}

static int handler_class = -1;
static void on_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    MPI_Error_class(*code, &handler_class);
}

/* An MPI_Iallreduce in error: it fails at once, through the handler. */
static int errors(void)
{
    MPI_Comm c;
    MPI_Errhandler eh;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set_up(c);
    MPI_Comm_create_errhandler(on_error, &eh);
    MPI_Comm_set_errhandler(c, eh);
    int s[4] = { 1, 2, 3, 4 }, cls = -1;
    MPI_Request q = MPI_REQUEST_NULL;
    int err = MPI_Iallreduce(s, NULL, 4, MPI_INT, MPI_SUM, c, &q);
    MPI_Error_class(err, &cls);
    if (me == 0)
        printf("errors: MPI_Iallreduce with a NULL recvbuf returned class %d (MPI_ERR_BUFFER is %d); the error "
               "handler saw class %d\n", cls, MPI_ERR_BUFFER, handler_class);
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}

/* A request that fails while it runs (the other ranks never start theirs):
 * MPI_Wait returns an error class, raised on the handler MPI gives
 * generalized requests (MPI_COMM_WORLD's, made to return here). */
static int fail(void)
{
    MPI_Comm c;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int x = 1, cls = -1;
    set_up(c);   /* (every rank: the communicator is made) */
    if (me == 0) {
        MPI_Request q;
        int start = MPI_Iallreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, c, &q);
        int err = MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Error_class(err, &cls);
        printf("fail: MPI_Iallreduce started with %d; MPI_Wait returned class %d (MPI_ERR_OTHER is %d), the request "
               "%s\n", start, cls, MPI_ERR_OTHER, q == MPI_REQUEST_NULL ? "freed" : "still set");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    int want = argc > 1 && !strcmp(argv[1], "multiple") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, got;
    MPI_Init_thread(&argc, &argv, want, &got);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (got < want) {
        if (me == 0) printf("SKIP: MPI_THREAD_MULTIPLE not provided (%d)\n", got);
        MPI_Finalize();
        return 77;
    }
    threads_fail_here();
    if (argc > 2 && !strcmp(argv[2], "--errors")) return errors();
    if (argc > 2 && !strcmp(argv[2], "--fail")) return fail();
    MPI_Op_create(user_sum, 1, &user_op);
    first_call_nonblocking();
#ifdef MPICH_VERSION
    /* (Open MPI 4.1 crashes in its own MPI_Wait there, interposer or not) */
    free_with_ibarrier();
#endif
    rounds(MPI_COMM_WORLD, "world");
    MPI_Comm dup, halves;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, np - me, &halves);   /* (reversed order) */
    rounds(dup, "dup");
    rounds(halves, me % 2 ? "odd" : "even");
    for (int root = 0; root < np; root++) bcast_datatypes(dup, root);
    if (argc > 2 && !strcmp(argv[2], "--free-pending")) free_before_wait();
    test_before_send();
    /* (only where every rank has threads: a launch may start ranks at different levels) */
    int least = got;
    MPI_Allreduce(&got, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (least >= MPI_THREAD_MULTIPLE) threads_at_once();
    if (least >= MPI_THREAD_MULTIPLE && argc > 2 && !strcmp(argv[2], "--free-tested")) free_while_tested();
    MPI_Comm_free(&dup);
    MPI_Comm_free(&halves);
    MPI_Op_free(&user_op);
    int mine[2] = { passed, failed }, all[2];
    MPI_Reduce(mine, all, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0)
        printf("mpi_nb_program %s np=%d: %d passed, %d failed\n", want == MPI_THREAD_MULTIPLE ? "multiple" : "single",
               np, all[0], all[1]);
    MPI_Finalize();
    return failed ? 1 : 0;
}
