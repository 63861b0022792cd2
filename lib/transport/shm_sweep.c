/* Named segments a dead job left in /dev/shm. A named segment (the way
 * taken where memfds cannot be shared) is unlinked once every rank of the
 * node has mapped it; until then only its creator's name holds it, and a
 * rank killed in between leaves its creator waiting until the launcher
 * kills that too, with the name still there. So the creator holds an
 * exclusive flock on the segment while it lives, and each process's first
 * segment sweeps the names whose lock nobody holds: their creator is gone,
 * whatever PID namespace it ran in. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "shm.h"

#define SHM_DIR "/dev/shm"
#define PREFIX "fastreduce-"
/* A name younger than this may be a creator's between its shm_open and its
 * flock: left alone. */
#define SWEEP_MIN_AGE_S 2

int fr_shm_named_lock(int fd)
{
    return flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
}

/* Whether a file last modified at @p mtime is at least SWEEP_MIN_AGE_S
 * old at @p now, to the nanosecond: whole seconds would make the guard
 * anything from one second to two. */
static int old_enough(const struct timespec *mtime, const struct timespec *now)
{
    double age = (double)(now->tv_sec - mtime->tv_sec) + (double)(now->tv_nsec - mtime->tv_nsec) * 1e-9;
    return age >= SWEEP_MIN_AGE_S;
}

/* Unlink @p name (in SHM_DIR) if it is our user's, old enough, and its
 * creator's lock is free; 1 when it was removed. */
static int sweep_one(const char *name, const struct timespec *now)
{
    char path[sizeof SHM_DIR + 256];
    snprintf(path, sizeof path, SHM_DIR "/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st, again;
    int gone = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        old_enough(&st.st_mtim, now) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        stat(path, &again) == 0 && again.st_ino == st.st_ino && again.st_dev == st.st_dev) {
        char shm_name[sizeof path];
        snprintf(shm_name, sizeof shm_name, "/%s", name);
        gone = shm_unlink(shm_name) == 0;
    }
    close(fd);
    return gone;
}

void fr_shm_sweep(void)
{
    static int swept;
    if (__atomic_exchange_n(&swept, 1, __ATOMIC_RELAXED)) return;
    DIR *d = opendir(SHM_DIR);
    if (!d) return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (!strncmp(e->d_name, PREFIX, sizeof PREFIX - 1)) n += sweep_one(e->d_name, &now);
    closedir(d);
    if (n) FR_INFO(FR_SUB_SHM, "shm: removed %d segment(s) that dead processes left in " SHM_DIR, n);
}
