/* The progress thread of the shared-memory collectives: non-blocking calls as jobs run in
 * posting order by a thread of the rank, and the entry point zero__shm_run. */
#ifdef ZERO_HAVE_MPI
#include "comm/shm_impl.h"

/* ------------------------------------------------------------------ progress thread */

/*
 * With ZERO_COMM_ASYNC on (one node), a non-blocking collective is a job on a FIFO queue that a
 * thread of this process runs, so the caller computes while its share of the collective (the
 * copies, the reduction, the waits for the node peers) happens. Order: every rank runs its
 * collectives through the window in the order it called them — the queue in posting order,
 * and a blocking collective (on the caller's thread) only once the queue is empty — so the
 * ranks' sequences still match call for call. Memory: the caller's stores to a job's buffers
 * happen before the post (mutex), the thread's writes of recv before the caller sees the job
 * done (mutex), and while jobs are pending the caller's thread does not touch the collectives'
 * state in zero__shm. The thread never calls MPI (the window is attached on the caller's thread
 * before the first post), so MPI_THREAD_FUNNELED suffices.
 */

int zero__shm_async(const zero__shm *s) { return s && s->async; }

void zero__shm_set_async(zero__shm *s, int mode) {
    if (!s || s->thread_up) return;
    s->async = mode != 0 && s->nnodes == 1;
    s->no_thread = mode == 2;
}

static zero_status run_job(zero_comm *c, zero__shm *s, const zero__shm_job *j) {
    switch (j->kind) {
    case ZERO__SHM_ALL_REDUCE: return zero__shm_run_all_reduce(c, s, j->send, j->recv, j->count, j->dt, j->op);
    case ZERO__SHM_REDUCE_SCATTER:
        return zero__shm_run_reduce_scatter(c, s, j->send, j->recv, j->count, j->dt, j->op, j->qblock);
    case ZERO__SHM_ALL_GATHER: return zero__shm_run_all_gather(c, s, j->send, j->recv, j->count, j->dt);
    }
    return ZERO_ERR_INVALID_ARG;
}

static void *progress_main(void *arg) {
    zero__shm *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->work, &s->mu);
        zero__shm_job *j = s->head;
        if (!j) break; /* stopping, and nothing left */
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        s->wc.err[0] = '\0';
        zero_status st = run_job(&s->wc, s, j);
        pthread_mutex_lock(&s->mu);
        j->status = st;
        if (st) { /* the text, cut to the job's room */
            memcpy(j->err, s->wc.err, sizeof j->err - 1);
            j->err[sizeof j->err - 1] = '\0';
        }
        j->done = 1;
        s->pending--;
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Starts the thread (first post); 0 when it cannot be (the caller then runs jobs itself). */
static int start_thread(zero_comm *c, zero__shm *s) {
    if (s->no_thread || pthread_mutex_init(&s->mu, NULL)) return 0;
    if (pthread_cond_init(&s->work, NULL)) goto no_work;
    if (pthread_cond_init(&s->done, NULL)) goto no_done;
    s->wc = *c;
    /* Signals stay with the program's threads: the thread starts with them blocked, all but
     * those of a fault in the thread itself, which must reach the program's (or MPI's) handler. */
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, progress_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) goto no_thread;
    s->thread_up = 1;
    return 1;
no_thread:
    pthread_cond_destroy(&s->done);
no_done:
    pthread_cond_destroy(&s->work);
no_work:
    pthread_mutex_destroy(&s->mu);
    return 0;
}

/* Waits for every posted job to run (the caller's thread then owns the collectives' state). */
static void drain(zero__shm *s) {
    if (!s->thread_up) return;
    pthread_mutex_lock(&s->mu);
    while (s->pending) pthread_cond_wait(&s->done, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* Runs what is queued, then ends and joins the thread. */
void zero__shm_stop_thread(zero__shm *s) {
    if (!s->thread_up) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->mu);
    s->thread_up = 0;
}

zero_status zero__shm_post(zero_comm *c, zero__shm *s, zero__shm_job *j) {
    j->next = NULL;
    j->done = 0;
    j->status = ZERO_OK;
    j->err[0] = '\0';
    /* On this thread, in call order: the window's allocation is collective MPI. */
    zero_status st = zero__shm_attach(c, s, zero__shm_kind_name(j->kind));
    if (st) return st;
    if (!s->thread_up && (!s->async || !start_thread(c, s))) {
        s->async = 0;
        j->status = run_job(c, s, j);
        if (j->status) { /* the error is the request's, as for a thread's job */
            memcpy(j->err, c->err, sizeof j->err - 1);
            j->err[sizeof j->err - 1] = '\0';
        }
        j->done = 1;
        return ZERO_OK;
    }
    pthread_mutex_lock(&s->mu);
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->pending++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return ZERO_OK;
}

zero_status zero__shm_job_wait(zero_comm *c, zero__shm *s, zero__shm_job *j) {
    if (s->thread_up) {
        pthread_mutex_lock(&s->mu);
        while (!j->done) pthread_cond_wait(&s->done, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    if (j->status && j->err[0]) ZERO__COMM_ERR(c, "%s", j->err);
    return j->status;
}

int zero__shm_job_done(zero__shm *s, zero__shm_job *j) {
    if (!s->thread_up) return j->done;
    pthread_mutex_lock(&s->mu);
    int d = j->done;
    pthread_mutex_unlock(&s->mu);
    return d;
}

zero_status zero__shm_run(zero_comm *c, zero__shm *s, const zero__shm_job *j) {
    drain(s);
    return run_job(c, s, j);
}
#endif
