/* keepalive.c -- background renewal. (In progress.) */
#include "internal.h"

void hl_keepalive_stop(hilock *l) { (void)l; }

hilock_status hilock_keepalive(hilock *l, hilock_lost_fn on_lost, void *arg)
{
    (void)on_lost; (void)arg;
    return l ? hl_fail(l->c, HILOCK_EINVAL, "keepalive: not built yet") : HILOCK_EINVAL;
}
