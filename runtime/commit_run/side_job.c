/* Work on a thread of its own while the calling one goes on (see side_job.h). */
#include "commit_run/side_job.h"
#include "util/error.h"

#include <stdio.h>

static void *side_main(void *p)
{
    dm_side_job *j = p;
    j->rc = j->work(j->arg);
    if (j->rc != 0) snprintf(j->error, sizeof j->error, "%s", dm_last_error());
    return NULL;
}

void dm_side_start(dm_side_job *j, int (*work)(void *), void *arg)
{
    *j = (dm_side_job){.work = work, .arg = arg};
    j->running = pthread_create(&j->thread, NULL, side_main, j) == 0;
    if (!j->running) side_main(j);
}

int dm_side_end(dm_side_job *j, int set_error)
{
    if (j->running) pthread_join(j->thread, NULL);
    j->running = 0;
    return j->rc == 0 ? 0 : set_error ? dm_set_error("%s", j->error) : -1;
}
