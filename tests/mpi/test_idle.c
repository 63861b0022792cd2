/* test_idle: what requests leave behind when nothing is queued.
 *
 *  1. The progress thread: a communicator's first request makes one thread
 *     (FASTREDUCE_PROGRESS=thread) or none (caller), counted in
 *     /proc/self/task; a second communicator makes its own; destroying them
 *     ends them.
 *  2. An idle communicator costs no CPU: after some requests, the process
 *     sleeps --seconds (default 2) with its progress threads alive, and its
 *     CPU time over that span (getrusage: every thread of the process) must
 *     stay under 1% of one core. A thread that polled instead of sleeping
 *     would take a whole core.
 *
 * Usage: test_idle [--seconds S]; prints each rank's CPU time when idle.
 */
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>
#include "testutil.h"

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A few requests of @p count floats on @p c, checked: the sum of ranks. */
static void some_requests(fr_comm_t c, size_t count)
{
    float *b = malloc(count * sizeof *b);
    fr_request_t q[4];
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < count; i++) b[i] = (float)tu.rank;
        if (fr_iallreduce(FR_IN_PLACE, b, count, FR_FLOAT32, FR_SUM, c, &q[0]) != FR_SUCCESS ||
            fr_wait(&q[0]) != FR_SUCCESS)
            tu_fail("request %d: %s", k, fr_last_error());
        float want = (float)(tu.size * (tu.size - 1) / 2);
        for (size_t i = 0; i < count; i++)
            if (b[i] != want) {
                tu_fail("request %d: element %zu is %g, not %g", k, i, b[i], want);
                break;
            }
    }
    free(b);
}

int main(int argc, char **argv)
{
    int prov;
    double seconds = 2;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
    tu_init("test_idle");
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    const char *mode = getenv("FASTREDUCE_PROGRESS");
    int per_comm = !(mode && !strcmp(mode, "caller"));

    tu_begin("one progress thread per communicator with requests (%s mode)", per_comm ? "thread" : "caller");
    fr_comm_t c1 = NULL, c2 = NULL;
    if (fr_comm_create(MPI_COMM_WORLD, NULL, &c1) || fr_comm_create(MPI_COMM_WORLD, NULL, &c2))
        tu_fail("fr_comm_create: %s", fr_last_error());
    int t0 = threads_now();
    fr_allreduce(FR_IN_PLACE, &prov, 0, FR_INT32, FR_SUM, c1);  /* (a blocking call makes none) */
    int t_blocking = threads_now();
    some_requests(c1, 1000);
    int t1 = threads_now();
    some_requests(c2, 100000);
    int t2 = threads_now();
    if (t_blocking != t0 || t1 != t0 + per_comm || t2 != t0 + 2 * per_comm)
        tu_fail("threads: %d at first, %d after a blocking call, %d after requests on one communicator, %d on two "
                "(want +0, +%d, +%d)", t0, t_blocking, t1, t2, per_comm, 2 * per_comm);

    tu_begin("an idle communicator costs no CPU over %.3g s", seconds);
    MPI_Barrier(MPI_COMM_WORLD);
    double c_start = cpu_seconds();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts)) {}
    double used = cpu_seconds() - c_start;
    printf("test_idle rank %d: %.4f s of CPU over %.3g idle seconds with %d progress thread(s)\n", tu.rank, used,
           seconds, 2 * per_comm);
    if (used > 0.01 * seconds) tu_fail("%.4f s of CPU over %.3g idle seconds (more than 1%%)", used, seconds);
    some_requests(c1, 10);   /* (the threads still serve after sleeping) */

    tu_begin("destroying the communicators ends their threads");
    if (fr_comm_destroy(c1) || fr_comm_destroy(c2)) tu_fail("fr_comm_destroy: %s", fr_last_error());
    /* (a joined thread leaves /proc/self/task a moment after the join
     * returns: the kernel wakes the joiner before it unlists the task) */
    int left = threads_now();
    for (int i = 0; i < 200 && left != t0; i++) {
        struct timespec ms = {0, 10 * 1000 * 1000};
        nanosleep(&ms, NULL);
        left = threads_now();
    }
    if (left != t0) tu_fail("%d threads 2 s after destroy, %d before the requests", left, t0);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
