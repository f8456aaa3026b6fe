/* The barrier of the shared-memory collectives: an epoch per rank in the window, spin, yield,
 * then a futex sleep; the C11 memory model orders what the ranks wrote around it. */
#ifdef ZERO_HAVE_MPI
#include "comm/shm_impl.h"

/* ------------------------------------------------------------------ barrier */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins this many times on a peer's counter before yielding, and yields this many times before
 * sleeping: a peer that is running arrives within microseconds; one that is not (ranks
 * outnumber cores) needs this core, and a sleeping waiter costs it nothing. */
#define ZERO__SHM_SPINS 2000
#define ZERO__SHM_YIELDS 8

#ifdef __linux__
/* Sleeps while *w == v (a futex shared between processes: no FUTEX_PRIVATE_FLAG). */
static void futex_wait(_Atomic uint32_t *w, uint32_t v) {
    syscall(SYS_futex, (uint32_t *)(void *)w, FUTEX_WAIT, v, NULL, NULL, 0);
}
static void futex_wake_all(_Atomic uint32_t *w) {
    syscall(SYS_futex, (uint32_t *)(void *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
#endif

static void wait_for(shm_ctl *peer, unsigned long long e) {
    for (unsigned i = 0; i < ZERO__SHM_SPINS; i++) {
        if (atomic_load_explicit(&peer->arrived, memory_order_acquire) >= e) return;
        cpu_relax();
    }
    for (unsigned i = 0; i < ZERO__SHM_YIELDS; i++) {
        if (atomic_load_explicit(&peer->arrived, memory_order_acquire) >= e) return;
        sched_yield();
    }
#ifdef __linux__
    /* Register as a sleeper, then re-check, then sleep only while the word still holds what was
     * seen: with the arriving side's store-then-read (all seq_cst), either this side sees the
     * arrival or that side sees the sleeper and wakes it. */
    while (atomic_load(&peer->arrived) < e) {
        atomic_fetch_add(&peer->sleepers, 1);
        uint32_t seen = atomic_load(&peer->arrived32);
        if (atomic_load(&peer->arrived) < e) futex_wait(&peer->arrived32, seen);
        atomic_fetch_sub(&peer->sleepers, 1);
    }
    atomic_thread_fence(memory_order_acquire);
#else
    while (atomic_load_explicit(&peer->arrived, memory_order_acquire) < e) sched_yield();
#endif
}

void zero__shm_barrier(zero__shm *s) {
    zero__stream_fence(); /* the pieces written with streaming stores, before the epoch */
    const unsigned long long e = ++s->epoch;
    shm_ctl *me = s->ctl[s->local];
    atomic_store(&me->arrived, e); /* seq_cst: also a release of everything written before */
#ifdef __linux__
    atomic_store(&me->arrived32, (uint32_t)e);
    if (atomic_load(&me->sleepers) > 0) futex_wake_all(&me->arrived32);
#endif
    for (int t = 0; t < s->nlocal; t++)
        if (t != s->local) wait_for(s->ctl[t], e);
}
#endif
