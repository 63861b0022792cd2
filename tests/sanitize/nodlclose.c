/* nodlclose: LD_PRELOAD'ed into the MPI ranks by scripts/sanitize.sh (not
 * part of the library or its tests). Open MPI 4.1 and PMIx dlclose() their
 * plugins (mca_*.so, pmix's ptl/gds/... components) in MPI_Finalize, before
 * LeakSanitizer runs at exit; their frames then show as "<unknown module>"
 * and no suppression naming the library can match them. Keeping every
 * object mapped lets LSan name each frame's library. */
int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
