/* `--ranks N`: runs the same `zero` command under the system's MPI launcher with N local ranks (the
 * command line minus `--ranks N`), and watches it: a rank that dies is named, a stopped run says
 * where its last checkpoint is. Under mpirun/srun the MPI world is used instead.
 *
 * Processes: zero (the launcher, the process the user started) -> mpiexec -> one monitor per rank
 * -> the rank. The launcher refuses far more ranks than CPUs, forwards SIGINT/SIGTERM/SIGHUP to
 * mpiexec and, once the job is down, prints that the run was stopped and where the last checkpoint
 * is (--save DIR: DIR/latest). A monitor is the rank's own process split off at the start of main
 * (cli_rank_monitor): it waits for the rank and, when the rank was killed by a signal that the
 * monitor did not forward (a crash, the OOM killer, kill -9) or exited with a status zero never
 * uses, prints the one line `zero: error: rank R ...` that says so; mpiexec (run --quiet, so
 * without its banners) then stops the other ranks, which stay silent.
 *
 * No process outlives the launcher and no scratch outlives the job: mpiexec gets SIGTERM when the
 * launcher dies, however it dies (PR_SET_PDEATHSIG), and stops the ranks; a monitor whose mpiexec
 * is gone (killed outright) stops its rank itself; a rank stopped by a signal removes its swap
 * files (cli_remove_scratch_on_stop); OpenMPI's session directory and shared memory live in the
 * job's scratch directory (launch_scratch.c), removed once every process of the job is gone, or by
 * the next launch when the launcher was killed outright; and the swap files a killed rank could
 * not remove are swept from the --offload-* nvme:DIR directories when the job ends. */
#define _GNU_SOURCE /* sigabbrev_np */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* At most this many ranks per CPU the process may use, unless --oversubscribe. */
#define RANKS_PER_CPU 8
#define MONITOR_ENV   "ZERO_RANK_MONITOR"
#define REPORT_ENV    "ZERO_LAUNCH_REPORT" /* a file where monitors note that they reported */
#define JOBDIR_ENV    "ZERO_LAUNCH_DIR"    /* the job's scratch directory, whose lock monitors hold */
/* How long a monitor whose mpiexec is gone lets its rank remove its scratch after SIGTERM before
 * SIGKILL, and how long the launcher waits for the ranks to go before it removes the job's
 * scratch directory (left for the next launch past that). */
#define ORPHAN_GRACE_MS 10000

int cli_argc;
char **cli_argv;

static volatile sig_atomic_t g_signal;        /* the first stop signal the launcher / monitor received */
static volatile sig_atomic_t g_forwarded[65]; /* each signal forwarded to the child */
static volatile pid_t g_child;                /* mpiexec (launcher) or the rank (monitor) */

static void forward(int sig) {
    if (!g_signal && sig != SIGCONT) g_signal = sig;
    if (sig > 0 && sig < 65) g_forwarded[sig] = 1;
    if (g_child > 0) kill(g_child, sig);
}

static void handle(const int *sigs, int n) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < n; i++) sigaction(sigs[i], &sa, NULL);
}

static const char *sig_name(int sig, char *buf, size_t cap) {
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) snprintf(buf, cap, "SIG%s", abbrev);
    else snprintf(buf, cap, "signal %d", sig);
    return buf;
}

/* Dies of `sig` as the default action would (so that a parent sees the same death). */
__attribute__((noreturn)) static void die_of(int sig) {
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    _exit(128 + sig);
}

/* One write of the whole line, so that lines of several ranks do not interleave. */
static void say(const char *line) {
    fflush(stderr);
    ssize_t n = write(STDERR_FILENO, line, strlen(line));
    (void)n;
}

/* A rank's failure goes to the launcher's report file (and to stderr when `print`), so that the
 * launcher knows that a rank, not mpiexec, ended the job, and who said why. */
static void report(const char *path, const char *line, int print) {
    if (print) say(line);
    if (!path[0]) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = write(fd, line, strlen(line));
    (void)n;
    close(fd);
}

static void woken(int sig) { (void)sig; }

void cli_rank_monitor(void) {
    const char *m = getenv(MONITOR_ENV);
    if (!m || strcmp(m, "1") != 0) return;
    unsetenv(MONITOR_ENV);
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMIX_RANK");
    if (!rank) return; /* not a rank of a launch: nothing to watch */
    char report_path[4096] = "";
    const char *rp = getenv(REPORT_ENV);
    if (rp) snprintf(report_path, sizeof report_path, "%s", rp);
    unsetenv(REPORT_ENV);
    const char *jd = getenv(JOBDIR_ENV);
    if (jd) cli_job_scratch_join(jd); /* before the fork: the rank holds the lock too */
    unsetenv(JOBDIR_ENV);
    fflush(stdout);
    fflush(stderr);
    const pid_t monitor = getpid(), mpiexec = getppid();
    const pid_t child = fork();
    if (child < 0) return; /* no monitor: the rank runs unwatched, as under a user's mpirun */
    if (child == 0) {
        /* the rank: it goes when its monitor goes (mpiexec's last resort is SIGKILL to the monitor) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != monitor) _exit(CLI_RUNTIME);
        return;
    }
    g_child = child;
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT};
    handle(sigs, (int)(sizeof sigs / sizeof sigs[0]));
    struct sigaction wake;
    memset(&wake, 0, sizeof wake);
    wake.sa_handler = woken; /* the rank's end cuts the sleep below short */
    sigemptyset(&wake.sa_mask);
    sigaction(SIGCHLD, &wake, NULL);
    /* Waits for the rank, and looks at its own parent every 0.2 s: when mpiexec is gone (killed
     * outright) nobody else will stop the rank, so the monitor does, as mpiexec would (SIGCONT for a
     * stopped rank, SIGTERM, which lets it remove its scratch, and SIGKILL after a grace time). */
    int status = 0, orphan_ms = -1;
    for (;;) {
        const pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child) break;
        if (w < 0 && errno != EINTR) _exit(CLI_RUNTIME);
        if (orphan_ms < 0 && getppid() != mpiexec) {
            orphan_ms = 0;
            forward(SIGCONT);
            forward(SIGTERM);
        } else if (orphan_ms >= ORPHAN_GRACE_MS) {
            kill(child, SIGKILL);
        }
        const struct timespec q = {0, 200000000};
        nanosleep(&q, NULL);
        if (orphan_ms >= 0) orphan_ms += 200;
    }
    char line[512], name[32];
    if (WIFEXITED(status)) {
        const int code = WEXITSTATUS(status);
        /* 0, 1 and 2 are zero's own: the rank said what went wrong */
        if (code != 0) {
            snprintf(line, sizeof line, "zero: error: rank %s (pid %ld) exited with status %d\n", rank, (long)child,
                     code);
            report(report_path, line, code > CLI_USAGE && !g_signal);
        }
        _exit(code);
    }
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        if (sig < 65 && g_forwarded[sig]) die_of(sig); /* stopped on purpose (mpiexec, the user) */
        const char *why = "";
        if (sig == SIGKILL) why = ": the kernel's out-of-memory killer, or another process";
        else if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT)
            why = ": a crash in zero (please report it)";
        snprintf(line, sizeof line,
                 "zero: error: rank %s (pid %ld) was killed by signal %d (%s%s)%s; the other ranks are stopped\n", rank,
                 (long)child, sig, sig_name(sig, name, sizeof name), why, WCOREDUMP(status) ? ", core dumped" : "");
        report(report_path, line, 1);
        _exit(128 + sig);
    }
    _exit(CLI_RUNTIME);
}

/* The CPUs this process may run on (its affinity mask), at least 1. */
static int usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The value of `--flag V` or `--flag=V` on the command line, or NULL. */
static const char *arg_value(const char *flag) {
    const size_t n = strlen(flag);
    for (int i = 1; i < cli_argc; i++) {
        if (!cli_argv[i]) continue; /* argv ends in NULL, never before argc */
        if (!strcmp(cli_argv[i], flag) && i + 1 < cli_argc) return cli_argv[i + 1];
        if (!strncmp(cli_argv[i], flag, n) && cli_argv[i][n] == '=') return cli_argv[i] + n + 1;
    }
    return NULL;
}

static int has_arg(const char *flag) {
    for (int i = 1; i < cli_argc; i++)
        if (!strcmp(cli_argv[i], flag)) return 1;
    return 0;
}

/* After a stop: "the last checkpoint is DIR/step_N ..." from --save DIR and DIR/latest. */
static void say_stopped(int sig) {
    char line[4608], name[32], latest[256] = "";
    const char *save = arg_value("--save");
    if (save) {
        char path[4096];
        snprintf(path, sizeof path, "%s/latest", save);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(latest, sizeof latest, f)) latest[0] = 0;
            fclose(f);
            latest[strcspn(latest, "\r\n")] = 0;
        }
    }
    if (!save)
        snprintf(line, sizeof line, "zero: stopped by %s: nothing was saved (no --save DIR)\n",
                 sig_name(sig, name, sizeof name));
    else if (!latest[0])
        snprintf(line, sizeof line, "zero: stopped by %s: no checkpoint was saved in %s yet\n",
                 sig_name(sig, name, sizeof name), save);
    else
        snprintf(line, sizeof line, "zero: stopped by %s: the last checkpoint is %s/%s (continue with --resume %s)\n",
                 sig_name(sig, name, sizeof name), save, latest, save);
    say(line);
}

/* The ranks' command line: this one's words after the program, without the launcher's own flags
 * (`drop`: each takes a value; `--oversubscribe` takes none) and with `extra` appended. */
char **cli_rank_args(const char *const *drop, const char *const *extra) {
    static const char *const own[] = {"--ranks", "--hostfile", "--elastic", "--max-restarts", NULL};
    int n_extra = 0;
    while (extra && extra[n_extra]) n_extra++;
    char **args = calloc((size_t)cli_argc + (size_t)n_extra + 1, sizeof *args);
    if (!args) return NULL;
    int k = 0;
    for (int i = 1; i < cli_argc; i++) {
        const char *a = cli_argv[i];
        if (!strcmp(a, "--oversubscribe")) continue;
        int skip = 0;
        for (int pass = 0; pass < 2 && !skip; pass++)
            for (const char *const *d = pass ? drop : own; d && *d && !skip; d++) {
                const size_t n = strlen(*d);
                if (!strcmp(a, *d)) skip = 2; /* and its value */
                else if (!strncmp(a, *d, n) && a[n] == '=') skip = 1;
            }
        if (skip) {
            i += skip - 1;
            continue;
        }
        args[k++] = cli_argv[i];
    }
    for (int j = 0; j < n_extra; j++) args[k++] = (char *)extra[j];
    args[k] = NULL;
    return args;
}

int cli_job_run(const cli_job *j, cli_job_end *end) {
    memset(end, 0, sizeof *end);
    /* The binary is /proc/self/exe, so a PATH lookup cannot pick another zero. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return cli_error(CLI_RUNTIME, "%s: cannot find this program's path: %s", j->what, strerror(errno));
    self[n] = 0;
    if (!j->hostfile) {
        /* N ranks on this machine share its cores: unless the user chose, give each rank its share
         * of threads, so OpenMP and OpenBLAS pools do not fight over oversubscribed cores. */
        const int cpus = usable_cpus();
        char threads[24];
        snprintf(threads, sizeof threads, "%d", cpus > j->np ? cpus / j->np : 1);
        const char *omp = getenv("OMP_NUM_THREADS"); /* the user's choice sizes both pools */
        setenv("OPENBLAS_NUM_THREADS", omp ? omp : threads, 0);
        setenv("OMP_NUM_THREADS", threads, 0);
    } else {
        /* A host that vanishes without closing its connections (a crash, a cut link) is noticed by
         * mpiexec only through TCP keepalives on its daemon's connection: OpenMPI's default idles
         * 300 s and then probes 9 times 20 s apart (8 minutes); these make it about 25 s. */
        setenv("OMPI_MCA_oob_tcp_keepalive_time", "10", 0);
        setenv("OMPI_MCA_oob_tcp_keepalive_intvl", "5", 0);
        setenv("OMPI_MCA_oob_tcp_keepalive_probes", "3", 0);
    }
    setenv(MONITOR_ENV, "1", 1);
    setenv(CLI_TTY_ENV_OUT, isatty(STDOUT_FILENO) ? "1" : "0", 1);
    setenv(CLI_TTY_ENV_ERR, isatty(STDERR_FILENO) ? "1" : "0", 1);
    /* What an earlier job whose launcher was killed outright left, then this job's own directory:
     * OpenMPI's session directory and shared-memory segments go in it unless the user placed them
     * (OpenMPI 4.1's variables, tested; OpenMPI 5's btl "sm" and prte ones, not tested). On other
     * hosts (--hostfile) the directory does not exist: their ranks keep OpenMPI's own places. */
    cli_job_scratch_sweep();
    static cli_job_scratch job;
    char report_path[4200] = "";
    if (cli_job_scratch_create(&job) == 0) {
        static const char *vars[] = {"OMPI_MCA_orte_tmpdir_base", "OMPI_MCA_btl_vader_backing_directory",
                                     "OMPI_MCA_btl_sm_backing_directory", "OMPI_MCA_osc_sm_backing_directory",
                                     "PRTE_MCA_prte_tmpdir_base"};
        if (!j->hostfile) {
            for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) setenv(vars[i], job.dir, 0);
            setenv(JOBDIR_ENV, job.dir, 1);
        }
        snprintf(report_path, sizeof report_path, "%s/report", job.dir);
        const int rfd = open(report_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (rfd >= 0) close(rfd);
        else report_path[0] = 0;
    } else {
        const char *tmpdir = getenv("TMPDIR");
        snprintf(report_path, sizeof report_path, "%s/zero-launch-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
        const int rfd = mkstemp(report_path);
        if (rfd >= 0) close(rfd);
        else report_path[0] = 0;
    }
    if (report_path[0]) setenv(REPORT_ENV, report_path, 1);

    /* mpiexec's command line */
    extern char **environ;
    int argc = 0, nenv = 0;
    while (j->args[argc]) argc++;
    for (char **e = environ; *e; e++) nenv++;
    char **args = calloc((size_t)argc + 2 * (size_t)nenv + 16, sizeof *args);
    char np[16];
    snprintf(np, sizeof np, "%d", j->np);
    int k = 0;
    if (args) {
        args[k++] = (char *)ZERO_MPIEXEC;
        args[k++] = (char *)"--quiet"; /* the monitors say which rank died, in one line */
        /* OpenMPI binds each rank to one core when N <= 2, which would squeeze a rank's threads
         * (OpenMP, OpenBLAS, the comm progress thread) onto that core: the threads are sized above. */
        args[k++] = (char *)"--bind-to";
        args[k++] = (char *)"none";
        if (geteuid() == 0) args[k++] = (char *)"--allow-run-as-root";
        if (j->hostfile) { /* ranks fill the hosts in order, each up to its slots */
            args[k++] = (char *)"--hostfile";
            args[k++] = (char *)j->hostfile;
            args[k++] = (char *)"--map-by";
            args[k++] = (char *)"slot";
            /* the ranks on other hosts get what those on this one inherit: the thread counts and
             * every ZERO_* variable (the monitor's, the launcher's notes, the user's settings) */
            for (char **e = environ; *e; e++)
                if (!strncmp(*e, "ZERO_", 5) || !strncmp(*e, "OMP_NUM_THREADS=", 16) ||
                    !strncmp(*e, "OPENBLAS_NUM_THREADS=", 21))
                    args[k++] = (char *)"-x", args[k++] = *e;
        } else {
            args[k++] = (char *)"--oversubscribe"; /* the check is ours; mpiexec's (ranks <= cores) is stricter */
        }
        args[k++] = (char *)"-np";
        args[k++] = np;
        args[k++] = self;
        for (int i = 0; i < argc; i++) args[k++] = j->args[i];
        args[k] = NULL;
    }
    fflush(stdout);
    fflush(stderr);

    /* mpiexec as a child; an exec failure comes back through a close-on-exec pipe */
    int pfd[2] = {-1, -1};
    if (!args || pipe2(pfd, O_CLOEXEC) != 0) {
        const int e = args ? errno : ENOMEM;
        free(args);
        unsetenv(MONITOR_ENV);
        unsetenv(REPORT_ENV);
        unsetenv(JOBDIR_ENV);
        if (report_path[0]) unlink(report_path);
        cli_job_scratch_remove(&job, 0);
        return cli_error(CLI_RUNTIME, "%s: cannot start the MPI launcher: %s", j->what, strerror(e));
    }
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    handle(sigs, (int)(sizeof sigs / sizeof sigs[0]));
    const pid_t launcher = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        /* mpiexec goes with the launcher, however the launcher ends (kill -9 included): SIGTERM,
         * so that it stops the ranks and removes its files as when the user stops it */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != launcher) _exit(127); /* the launcher died before the line above */
        execvp(args[0], args);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    int e = errno;
    close(pfd[1]);
    free(args);
    unsetenv(MONITOR_ENV);
    unsetenv(REPORT_ENV);
    unsetenv(CLI_TTY_ENV_OUT);
    unsetenv(CLI_TTY_ENV_ERR);
    unsetenv(JOBDIR_ENV);
    if (pid < 0) {
        close(pfd[0]);
        if (report_path[0]) unlink(report_path);
        cli_job_scratch_remove(&job, 0);
        return cli_error(CLI_RUNTIME, "%s: cannot start the MPI launcher: %s", j->what, strerror(e));
    }
    g_child = pid;
    if (g_signal) kill(pid, g_signal); /* a signal that came before g_child was set */
    int exec_errno = 0;
    ssize_t got;
    while ((got = read(pfd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
    close(pfd[0]);
    int status = 0, werr = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            werr = errno;
            break;
        }
    g_child = 0;
    struct stat rs;
    end->reported = report_path[0] && stat(report_path, &rs) == 0 && rs.st_size > 0;
    if (report_path[0]) unlink(report_path);
    /* Ranks may outlive mpiexec (killed outright): their monitors stop them; the directory goes
     * once they have, and the swap files that a rank killed outright left go with the job. */
    cli_job_scratch_remove(&job, ORPHAN_GRACE_MS + 2000);
    static const char *nvme_flags[] = {"--offload-optimizer", "--offload-param"};
    for (size_t i = 0; i < sizeof nvme_flags / sizeof nvme_flags[0]; i++) {
        const char *v = arg_value(nvme_flags[i]);
        if (v && !strncmp(v, "nvme:", 5) && v[5]) zero_swap_sweep(v + 5, NULL, NULL);
    }
    if (werr) return cli_error(CLI_RUNTIME, "%s: waiting for the MPI launcher: %s", j->what, strerror(werr));
    if (got == (ssize_t)sizeof exec_errno)
        return cli_error(CLI_RUNTIME,
                         "%s: cannot run the MPI launcher '%s': %s (install openmpi-bin, or run under mpirun)", j->what,
                         ZERO_MPIEXEC, strerror(exec_errno));
    end->status = status;
    end->stop_signal = g_signal;
    return CLI_OK;
}

void cli_job_stopped(int sig) {
    say_stopped(sig);
    die_of(sig);
}

int cli_launch_ranks(int nranks) {
    const int cpus = usable_cpus();
    if (nranks > RANKS_PER_CPU * cpus && !has_arg("--oversubscribe"))
        return cli_error(
            CLI_USAGE,
            "--ranks %d: this process may use %d CPU%s, and more than %d ranks (%d per CPU) would run so "
            "slowly that the job may never end: use fewer ranks, or add --oversubscribe to run them anyway",
            nranks, cpus, cpus == 1 ? "" : "s", RANKS_PER_CPU * cpus, RANKS_PER_CPU);
    char **args = cli_rank_args(NULL, NULL);
    if (!args) return cli_error(CLI_RUNTIME, "--ranks: out of memory");
    char what[32];
    snprintf(what, sizeof what, "--ranks %d", nranks);
    const cli_job j = {.np = nranks, .hostfile = NULL, .args = args, .what = what};
    cli_job_end end;
    const int rc = cli_job_run(&j, &end);
    free(args);
    if (rc != CLI_OK) return rc;
    if (end.stop_signal) cli_job_stopped(end.stop_signal);
    return cli_job_status(&j, &end);
}

int cli_job_status(const cli_job *j, const cli_job_end *end) {
    const int status = end->status;
    if (WIFEXITED(status)) {
        const int code = WEXITSTATUS(status);
        /* a rank's own exit status (0, 1, 2) passes through, a death (named by its monitor) is 1 */
        if (code == 0 || end->reported) return code <= CLI_USAGE ? code : CLI_RUNTIME;
        /* no rank ended with a failure: mpiexec failed by itself (--quiet kept its explanation) */
        return cli_error(CLI_RUNTIME,
                         "%s: the MPI launcher '%s' exited with status %d before any rank said why (run the "
                         "command under %s -np %d yourself to see its messages)",
                         j->what, ZERO_MPIEXEC, code, ZERO_MPIEXEC, j->np);
    }
    char name[32];
    return cli_error(CLI_RUNTIME, "%s: the MPI launcher '%s' was killed by %s", j->what, ZERO_MPIEXEC,
                     sig_name(WTERMSIG(status), name, sizeof name));
}
