/*
 * pmix_intruder - a PMIx client that another user starts against a job's
 * server, claiming one of its ranks (PMIX_NAMESPACE, PMIX_RANK and
 * PMIX_SERVER_URI41 set by hand; in a user namespace that maps its uid to
 * 0, libpmix takes it for root's). It tries to abort the job with its own
 * status and message.
 * Output: "init rc=<n>", then, if init passed, "abort rc=<n>".
 */
#include <pmix.h>
#include <stdio.h>

int main(void)
{
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);

    printf("init rc=%d\n", (int)rc);
    fflush(stdout);
    if (rc != PMIX_SUCCESS) return 1;
    rc = PMIx_Abort(7, "intruder abort", NULL, 0);
    printf("abort rc=%d\n", (int)rc);
    return 0;
}
