/* `--ranks N`: re-runs the same `zero` command under the system's MPI launcher with N local
 * ranks (the command line minus `--ranks N`). Under mpirun/srun the MPI world is used instead. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ZERO_MPIEXEC
#define ZERO_MPIEXEC "mpiexec"
#endif

int cli_argc;
char **cli_argv;

int cli_launch_ranks(int nranks) {
    /* The binary is /proc/self/exe, so a PATH lookup cannot pick another zero. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return cli_error(CLI_RUNTIME, "--ranks: cannot find this program's path: %s", strerror(errno));
    self[n] = 0;
    char np[16];
    snprintf(np, sizeof np, "%d", nranks);
    const int argc = cli_argc;
    char **argv = cli_argv;
    char **args = calloc((size_t)argc + 12, sizeof *args);
    if (!args) return cli_error(CLI_RUNTIME, "--ranks: out of memory");
    int k = 0;
    args[k++] = (char *)ZERO_MPIEXEC;
    args[k++] = (char *)"--oversubscribe";
    /* OpenMPI binds each rank to one core when N <= 2, which would squeeze a rank's threads
     * (OpenMP, OpenBLAS, the comm progress thread) onto that core: the threads are sized below. */
    args[k++] = (char *)"--bind-to";
    args[k++] = (char *)"none";
    if (geteuid() == 0) args[k++] = (char *)"--allow-run-as-root";
    args[k++] = (char *)"-np";
    args[k++] = np;
    args[k++] = self;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks")) {
            i++; /* and its value */
            continue;
        }
        if (!strncmp(argv[i], "--ranks=", 8)) continue;
        args[k++] = argv[i];
    }
    args[k] = NULL;
    /* N ranks on this machine share its cores: unless the user chose, give each rank its share
     * of threads, so OpenMP and OpenBLAS pools do not fight over oversubscribed cores. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char threads[24];
    snprintf(threads, sizeof threads, "%ld", cores > nranks ? cores / nranks : 1);
    const char *omp = getenv("OMP_NUM_THREADS"); /* the user's choice sizes both pools */
    setenv("OPENBLAS_NUM_THREADS", omp ? omp : threads, 0);
    setenv("OMP_NUM_THREADS", threads, 0);
    fflush(stdout);
    fflush(stderr);
    execvp(args[0], args);
    int e = errno;
    free(args);
    return cli_error(CLI_RUNTIME, "--ranks %d: cannot run the MPI launcher '%s': %s (install openmpi-bin, or run under mpirun)",
                     nranks, ZERO_MPIEXEC, strerror(e));
}
