/*
 * pmix_intruder - a PMIx client that another user starts against a job's
 * server, claiming one of its ranks (PMIX_NAMESPACE, PMIX_RANK and
 * PMIX_SERVER_URI41 set by hand; in a user namespace that maps its uid to
 * 0, libpmix takes it for root's). It tries to abort the job with its own
 * status and message; with the argument "log", it logs a line instead
 * (PMIx_Log); with "finalize", it finalizes
 * (the job's own user, claiming a rank that never connects).
 * Output: "init rc=<n>", then, if init passed, "abort rc=<n>" or
 * "finalize rc=<n>".
 */
#include <pmix.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);

    printf("init rc=%d\n", (int)rc);
    fflush(stdout);
    if (rc != PMIX_SUCCESS) return 1;
    if (argc > 1 && strcmp(argv[1], "log") == 0) {
        pmix_info_t info;
        PMIX_INFO_LOAD(&info, PMIX_LOG_STDERR, "a line from an intruder\n", PMIX_STRING);
        rc = PMIx_Log(&info, 1, NULL, 0);
        printf("log rc=%d\n", (int)rc);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "finalize") == 0) {
        rc = PMIx_Finalize(NULL, 0);
        printf("finalize rc=%d\n", (int)rc);
        return 0;
    }
    rc = PMIx_Abort(7, "intruder abort", NULL, 0);
    printf("abort rc=%d\n", (int)rc);
    return 0;
}
