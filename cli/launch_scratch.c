/* The scratch directory of a `--ranks N` job: where OpenMPI puts its session directory and its
 * shared-memory segments, so that whatever the job leaves goes with the directory.
 *
 * One directory per job, `zero-job-XXXXXX` (mode 0700) in /dev/shm (where OpenMPI's segments go
 * anyway: memory, not disk), else in $TMPDIR or /tmp, holding a file `lock`. The launcher, mpiexec
 * (the launcher's descriptor, inherited) and every rank (its monitor's, inherited) hold a shared
 * flock on it for their whole life; the kernel drops it when a process ends, however it ends. So
 * a directory whose lock can be taken exclusively belongs to no running process: the launcher
 * removes its own once the job is down, and a launcher removes every such directory of its user
 * that an earlier job left (its launcher killed by kill -9 before it could) when it starts. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define JOB_PREFIX "zero-job-"
#define MAX_DEPTH  16 /* OpenMPI's session directory nests 4 deep */

/* Removes everything in the directory open as dfd (closing dfd), never following a link: a link is
 * removed, not what it points to. */
static void empty_dir(int dfd, int depth) {
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            const int sub =
                depth < MAX_DEPTH ? openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (sub >= 0) empty_dir(sub, depth + 1);
            unlinkat(dfd, de->d_name, AT_REMOVEDIR);
        } else {
            unlinkat(dfd, de->d_name, 0);
        }
    }
    closedir(d);
}

/* Removes the job directory `name` in the directory open as pfd when no process holds its lock;
 * waits up to `wait_ms` for that. Returns 1 when it was removed. */
static int remove_if_free(int pfd, const char *name, int wait_ms) {
    struct stat st;
    /* a directory of this user that no one else may enter, as mkdtemp made it: nothing else */
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077))
        return 0;
    const int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return 0;
    /* no lock file yet: a launcher is creating it */
    const int lfd = openat(dfd, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int got = lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) == 0;
    for (int waited = 0; lfd >= 0 && !got && waited < wait_ms; waited += 50) {
        const struct timespec q = {0, 50000000};
        nanosleep(&q, NULL);
        got = flock(lfd, LOCK_EX | LOCK_NB) == 0;
    }
    if (!got) {
        if (lfd >= 0) close(lfd);
        close(dfd);
        return 0;
    }
    empty_dir(dfd, 0); /* closes dfd; the lock stays held until the directory is gone */
    const int gone = unlinkat(pfd, name, AT_REMOVEDIR) == 0;
    close(lfd);
    return gone;
}

/* Where job directories go: /dev/shm when it is a directory this user may write, else $TMPDIR or
 * /tmp. */
static const char *parent_dir(void) {
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

int cli_job_scratch_sweep(void) {
    const char *parent = parent_dir();
    const int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) return 0;
    const int dfd = dup(pfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0) close(dfd);
        close(pfd);
        return 0;
    }
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (!strncmp(de->d_name, JOB_PREFIX, strlen(JOB_PREFIX))) n += remove_if_free(pfd, de->d_name, 0);
    closedir(d);
    close(pfd);
    return n;
}

int cli_job_scratch_create(cli_job_scratch *j) {
    memset(j, 0, sizeof *j);
    j->lock_fd = -1;
    if ((size_t)snprintf(j->dir, sizeof j->dir, "%s/" JOB_PREFIX "XXXXXX", parent_dir()) >= sizeof j->dir ||
        !mkdtemp(j->dir)) {
        j->dir[0] = 0;
        return -1;
    }
    char lock[sizeof j->dir + 8];
    snprintf(lock, sizeof lock, "%s/lock", j->dir);
    /* not close-on-exec: mpiexec inherits it, and holds the lock as long as it runs */
    j->lock_fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (j->lock_fd < 0 || flock(j->lock_fd, LOCK_SH) != 0) {
        cli_job_scratch_remove(j, 0);
        return -1;
    }
    return 0;
}

int cli_job_scratch_remove(cli_job_scratch *j, int wait_ms) {
    if (j->lock_fd >= 0) close(j->lock_fd);
    j->lock_fd = -1;
    if (!j->dir[0]) return 1;
    char *slash = strrchr(j->dir, '/');
    int gone = 0;
    *slash = 0;
    const int pfd = open(j->dir[0] ? j->dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd >= 0) {
        gone = remove_if_free(pfd, slash + 1, wait_ms);
        close(pfd);
    }
    *slash = '/';
    if (gone) j->dir[0] = 0;
    return gone;
}

void cli_job_scratch_join(const char *dir) {
    char lock[4200];
    if ((size_t)snprintf(lock, sizeof lock, "%s/lock", dir) >= sizeof lock) return;
    /* inherited by the rank through fork (not exec): the lock lasts as long as either runs */
    const int fd = open(lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0) close(fd);
}
