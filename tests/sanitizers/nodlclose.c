/* tests/sanitizers/nodlclose.c — preloaded into the MPI tests under `make test-asan`: dlclose()
 * does nothing, so that OpenMPI's plugins stay mapped until exit and LeakSanitizer can name their
 * frames (and tests/sanitizers/lsan.supp match them); a plugin unloaded at MPI_Finalize leaves
 * "<unknown module>" frames that no suppression can tell from ours. */
int dlclose(void *handle);

int dlclose(void *handle) {
    (void)handle;
    return 0;
}
