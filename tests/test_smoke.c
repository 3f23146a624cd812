#include <criterion/criterion.h>
#include <string.h>
#include "fixture.h"
#include "hilock.h"

Test(smoke, acquire_release_roundtrip)
{
    hlt_redis *r = hlt_redis_start(NULL);
    cr_assert_not_null(r);
    hilock_client *c;
    hilock *l;
    cr_assert_eq(hilock_client_open(r->url, &c), HILOCK_OK);
    cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    char *v = hlt_get(r, "k");
    cr_assert_str_eq(v, hilock_token(l));
    free(v);
    cr_assert(hilock_fence(l) > 1000000000000ULL);
    cr_assert_eq(hlt_redis_start != NULL, 1);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hlt_exists(r, "k"), 0);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}
