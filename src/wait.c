/* wait.c -- how a waiter spends the time between two acquire attempts. */
#include "internal.h"

/* Polling with jitter: a pause of about retry_delay_ms, never past the holder's expiry
 * (hint_us) nor the caller's deadline. */
void hl_wait_turn(hilock *l, int64_t hint_us, int64_t deadline_us)
{
    hl_sleep_until(hl_next_attempt(l->c, hint_us, deadline_us));
}
