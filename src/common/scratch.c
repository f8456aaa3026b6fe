/* The process-wide list of scratch files (NVMe swap files) that live handles own, so that a
 * process ending without freeing its handles (a stop signal, the comm watchdog) still removes them.
 *
 * The table is static and lock-free because zero_scratch_remove_all runs in signal handlers: a
 * slot is FREE, BUSY (being filled, being dropped, or claimed by a removal) or READY; only a READY
 * slot's path is read, and only by the one caller whose compare-and-swap moved it to BUSY. */
#include "common/internal.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define SCRATCH_SLOTS 32
#define SCRATCH_PATH  4096

enum { SLOT_FREE, SLOT_BUSY, SLOT_READY };

static _Atomic int g_state[SCRATCH_SLOTS];
static char g_path[SCRATCH_SLOTS][SCRATCH_PATH];

int zero__scratch_add(const char *path) {
    const size_t n = strlen(path);
    if (n == 0 || n >= SCRATCH_PATH) return -1;
    for (int k = 0; k < SCRATCH_SLOTS; k++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&g_state[k], &expect, SLOT_BUSY)) continue;
        memcpy(g_path[k], path, n + 1);
        atomic_store(&g_state[k], SLOT_READY);
        return k;
    }
    return -1; /* full: this file is left to the next run's sweep (zero_swap_sweep) */
}

void zero__scratch_drop(int slot) {
    if (slot < 0 || slot >= SCRATCH_SLOTS) return;
    /* READY -> BUSY first, so that a handler running now does not read a path being reused; a
     * slot a removal claimed (BUSY) stays claimed until here, so it is never handed out twice. */
    int expect = SLOT_READY;
    atomic_compare_exchange_strong(&g_state[slot], &expect, SLOT_BUSY);
    atomic_store(&g_state[slot], SLOT_FREE);
}

int zero_scratch_remove_all(void) {
    int removed = 0;
    for (int k = 0; k < SCRATCH_SLOTS; k++) {
        int expect = SLOT_READY;
        if (!atomic_compare_exchange_strong(&g_state[k], &expect, SLOT_BUSY)) continue;
        /* unlink(2) is async-signal-safe; the slot stays BUSY until its owner drops it */
        removed += unlink(g_path[k]) == 0;
    }
    return removed;
}
