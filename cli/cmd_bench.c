/* `zero bench adam|comm|io|step`: dispatch to the benchmark programs. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"

const char *cli_blas_core_note(void) {
    static char note[256];
    dec_compute_info ci;
    dec_compute_info_get(&ci);
    if (!ci.blas_core_better) return NULL;
    const char *named = getenv("OPENBLAS_CORETYPE");
    snprintf(note, sizeof note,
             "OpenBLAS runs AVX2 kernels on this AVX-512 CPU%s%s%s; its AVX-512 ones (%s) are faster",
             named ? " (OPENBLAS_CORETYPE=" : "", named ? named : "", named ? ")" : "", ci.blas_core_better);
    return note;
}

void cli_bench_blas_core_warning(void) {
    const char *note = cli_blas_core_note();
    if (note) fprintf(stderr, "zero: warning: %s, and the products are timed on the AVX2 ones\n", note);
}

int cli_bench(int argc, char **argv) {
    if (argc < 2)
        return cli_error(CLI_USAGE, "bench: expected a benchmark: adam, comm, io, rates, step or tokenize (zero bench "
                                    "--help)");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: zero bench adam|comm|io|rates|step|tokenize [--json] [options]   (zero bench comm --help)\n");
        return CLI_OK;
    }
    if (!strcmp(argv[1], "comm")) return cli_bench_comm(argc - 1, argv + 1);
    if (!strcmp(argv[1], "adam")) return cli_bench_adam(argc - 1, argv + 1);
    if (!strcmp(argv[1], "step")) return cli_bench_step(argc - 1, argv + 1);
    if (!strcmp(argv[1], "io")) return cli_bench_io(argc - 1, argv + 1);
    if (!strcmp(argv[1], "rates")) return cli_bench_rates(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tokenize")) return cli_bench_tokenize(argc - 1, argv + 1);
    return cli_error(CLI_USAGE, "unknown benchmark '%s': expected adam, comm, io, rates, step or tokenize", argv[1]);
}
