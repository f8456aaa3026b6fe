/* cli/tensorboard.h — TensorBoard event files of `zero train` (docs/CLI.md, "TensorBoard"): scalars
 * as TensorFlow Event records, written by rank 0 and flushed every step. */
#ifndef ZERO_CLI_TENSORBOARD_H
#define ZERO_CLI_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_tb cli_tb;

/* Creates dir (and its parents) and a new event file in it, events.out.tfevents.<unix
 * time>.<hostname>.<pid>, exclusively and without following a link (an existing file is never
 * reopened: a name that exists gets a ".N" suffix), and writes its first record (the file
 * version). Returns the writer, or NULL with err set. path gets the file's name (may be NULL). */
cli_tb *cli_tb_open(const char *dir, char *path, size_t path_cap, char *err, size_t err_cap);
/* Queues one scalar event (tag, step, value as a float: TensorBoard's simple_value). 0, or -1
 * when out of memory. */
int cli_tb_scalar(cli_tb *tb, const char *tag, int64_t step, double value);
/* Writes the queued events: 0, or -1 with errno set. */
int cli_tb_flush(cli_tb *tb);
/* Flushes and closes; tb may be NULL. 0, or -1 with errno set when a write or the close failed. */
int cli_tb_close(cli_tb *tb);

#endif
