/* Subcommands not built yet: each says so and fails, never fakes success.
 * Each moves to its own file (cmd_<name>.c) when it is implemented. */
#include "cli.h"

#define NOT_YET(fn, name)                                                                          \
    int fn(int argc, char **argv) {                                                                \
        (void)argc;                                                                                \
        (void)argv;                                                                                \
        return cli_error(CLI_RUNTIME, "%s is not supported yet", name);                           \
    }

