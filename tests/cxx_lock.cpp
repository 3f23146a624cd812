/* SPDX-License-Identifier: BSD-3-Clause */
// cxx_lock.cpp URL DEAD_URL [lost-default | lost-told | kinds | observe] -- include/hilock.hpp against a real
// server (run by tests/test_cxx.c, which checks what it leaves in Redis). Built with g++
// -std=c++17 -Wall -Wextra -Werror. Prints one line per check; exits 1 at the first failure.
// With lost-default: a std::lock_guard whose lock is deleted behind its back, under the default
// loss handler (which ends the program: test_cxx.c checks how). With lost-told: losses the
// program was told of before its scopes ended, under the default handler (it carries on). With
// kinds: shared_mutex and semaphore (hilock_rw_acquire, hilock_sem_acquire). With observe: the
// observer and the counters (client::observe, stats, prometheus).
#include <hilock.hpp>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <type_traits>
#include <utility>

using namespace std::chrono_literals;
using hilock_cpp::client;
using hilock_cpp::mutex;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            std::exit(1);                                                            \
        }                                                                            \
    } while (0)

// Runs f, which must throw hilock_cpp::error with status st; returns its what().
template <class F>
static std::string expect_error(hilock_status st, F f)
{
    try {
        f();
    } catch (const hilock_cpp::error &e) {
        if (e.status() != st)
            std::fprintf(stderr, "expected %s, got %s: %s\n", hilock_strerror(st), hilock_strerror(e.status()), e.what());
        CHECK(e.status() == st);
        return e.what();
    }
    std::fprintf(stderr, "expected an error (%s)\n", hilock_strerror(st));
    std::exit(1);
}

static void ok(const char *what) { std::printf("ok %s\n", what); }

// `cmd key` from a connection of its own; its integer reply.
static long long int_cmd(const char *url, const char *cmd, const char *key)
{
    const char *colon = std::strrchr(url, ':');
    CHECK(std::strncmp(url, "redis://127.0.0.1:", 18) == 0 && colon);
    redisContext *r = redisConnect("127.0.0.1", std::atoi(colon + 1));
    CHECK(r && !r->err);
    auto *rep = static_cast<redisReply *>(redisCommand(r, "%s %s", cmd, key));
    CHECK(rep && rep->type == REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

// DEL key from a connection of its own: the lock is gone behind its holder's back.
static void del_behind(const char *url, const char *key) { CHECK(int_cmd(url, "DEL", key) == 1); }

// The standard requirements, at compile time.
static_assert(!std::is_copy_constructible_v<mutex> && !std::is_copy_assignable_v<mutex>, "move-only");
static_assert(std::is_nothrow_move_constructible_v<mutex> && std::is_nothrow_move_assignable_v<mutex>, "");
static_assert(!std::is_copy_constructible_v<client> && std::is_nothrow_move_constructible_v<client>, "");
static_assert(std::is_nothrow_destructible_v<mutex> && noexcept(std::declval<mutex &>().unlock()),
              "BasicLockable: unlock and the destructor never throw");
static_assert(std::is_base_of_v<std::runtime_error, hilock_cpp::error>, "");
static_assert(std::is_base_of_v<hilock_cpp::error, hilock_cpp::lost_error>, "a loss is an error");
static_assert(!std::is_copy_constructible_v<hilock_cpp::guard> && !std::is_move_constructible_v<hilock_cpp::guard>, "");
static_assert(std::is_nothrow_move_constructible_v<hilock_cpp::shared_mutex> &&
              !std::is_copy_constructible_v<hilock_cpp::shared_mutex> &&
              noexcept(std::declval<hilock_cpp::shared_mutex &>().unlock_shared()), "");
static_assert(std::is_nothrow_move_constructible_v<hilock_cpp::semaphore> &&
              !std::is_copy_constructible_v<hilock_cpp::semaphore>, "");

static void try_lock_and_busy(const char *url)
{
    client a(url), b(url);
    mutex ma(a, "cxx:busy", 5s), mb(b, "cxx:busy", 5s);
    CHECK(ma.try_lock());
    CHECK(ma.owns_lock() && ma.validity() > 0ms && ma.validity() <= 5s);
    CHECK(ma.token().size() == 32 && ma.fence() > 0 && ma.key() == "cxx:busy");
    CHECK(!mb.try_lock() && !mb.owns_lock());
    auto t0 = std::chrono::steady_clock::now();
    CHECK(!mb.try_lock_for(100ms));
    CHECK(!mb.try_lock_until(std::chrono::steady_clock::now() - 1s));   // passed: one attempt
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);                    // does not hang
    uint64_t f = ma.fence();
    ma.unlock();
    CHECK(!ma.owns_lock() && ma.unlock_status() == HILOCK_OK && ma.fence() == 0 && ma.token().empty());
    CHECK(mb.try_lock_until(std::chrono::system_clock::now() + 2s));
    CHECK(mb.fence() > f);
    mb.unlock();
    ok("try_lock, BUSY is false, try_lock_for/until, fence grows");
}

static void std_guards(const char *url)
{
    client c(url);
    mutex m1(c, "cxx:g1", 5s), m2(c, "cxx:g2", 5s);
    {
        std::unique_lock<mutex> g(m1, 1s);
        CHECK(g.owns_lock() && m1.owns_lock());
    }
    CHECK(!m1.owns_lock() && m1.unlock_status() == HILOCK_OK);
    {
        std::scoped_lock g(m1, m2);   // std::lock underneath: lock/try_lock/unlock
        CHECK(m1.owns_lock() && m2.owns_lock());
    }
    CHECK(!m1.owns_lock() && !m2.owns_lock());
    {
        std::lock_guard<mutex> g(m1);
        CHECK(m1.owns_lock());
    }
    CHECK(!m1.owns_lock());
    ok("std::unique_lock, std::scoped_lock over two keys, std::lock_guard");
}

static void raii_and_move(const char *url)
{
    client c(url), other(url);
    mutex probe(other, "cxx:raii", 5s);
    {
        mutex m(c, "cxx:raii", 5s);
        m.lock();
        CHECK(!probe.try_lock());
    }   // destroyed while held: released
    CHECK(probe.try_lock());
    probe.unlock();

    mutex a(c, "cxx:raii", 5s);
    a.lock();
    std::string tok = a.token();
    mutex b(std::move(a));
    CHECK(!a.owns_lock() && b.owns_lock() && b.token() == tok);   // NOLINT: moved-from is empty
    mutex d(c, "cxx:other", 5s);
    d.lock();
    d = std::move(b);   // d releases cxx:other, takes over cxx:raii
    CHECK(d.owns_lock() && d.key() == "cxx:raii" && d.token() == tok && !b.owns_lock());
    mutex p2(other, "cxx:other", 5s);
    CHECK(p2.try_lock());
    p2.unlock();
    CHECK(!probe.try_lock());
    d.unlock();
    client moved(std::move(c));
    CHECK(c.get() == nullptr && moved.get() != nullptr);
    ok("destroyed while held releases; moves transfer the grant");
}

static void errors(const char *url, const char *dead)
{
    std::string w = expect_error(HILOCK_EINVAL, [] { client c("bogus://x"); });
    CHECK(w.find("hilock_client_open") != std::string::npos);
    // the library's own words, unchanged: which server (as it names them) and why
    hilock_options o;
    hilock_options_init(&o);
    const char *urls[] = { url, "bogus://x" };
    o.servers = urls;
    o.nservers = 2;
    w = expect_error(HILOCK_EINVAL, [&] { client two(o); });
    CHECK(w == std::string("hilock_client_new: ") + hilock_last_config_error());
    std::printf("two servers, one bad: %s\n", w.c_str());
    client c(url);
    mutex m(c, "cxx:err", 5s);
    m.lock();
    expect_error(HILOCK_EINVAL, [&] { m.lock(); });   // already held by this object
    expect_error(HILOCK_EINVAL, [&] { (void)m.try_lock(); });
    CHECK(m.owns_lock());
    mutex again(c, "cxx:err", 5s);   // the same client and key: not re-entrant, refused at once
    w = expect_error(HILOCK_EINVAL, [&] { again.lock(); });
    CHECK(w == "lock cxx:err: this client already holds cxx:err (hilock locks are not re-entrant)");
    w = expect_error(HILOCK_EINVAL, [&] { (void)again.try_lock_for(10s); });
    CHECK(w == "try_lock_for cxx:err: this client already holds cxx:err (hilock locks are not re-entrant)");
    CHECK(!again.owns_lock() && m.owns_lock());
    m.unlock();
    CHECK(again.try_lock());
    again.unlock();
    expect_error(HILOCK_EINVAL, [&] { m.extend(1s); });   // not held
    mutex zero(c, "cxx:err", 0ms);
    expect_error(HILOCK_EINVAL, [&] { zero.lock(); });

    client d(dead);
    mutex md(d, "cxx:err", 5s);
    w = expect_error(HILOCK_EIO, [&] { (void)md.try_lock(); });
    CHECK(w.find("127.0.0.1") != std::string::npos);   // the server is named
    try {
        (void)md.try_lock_for(10ms);
    } catch (const hilock_cpp::error &e) {
        CHECK(e.status() == HILOCK_EIO && !e.errmsg().empty() && e.errmsg() == d.errmsg());
    }
    ok("errors: bad URL, twice locked, not re-entrant, not held, bad ttl, dead server named");
}

static void expiry_extend_check(const char *url)
{
    client c(url), other(url);
    mutex m(c, "cxx:exp", 200ms);
    int lost = 0;
    m.on_lost([&](const hilock_cpp::lost_error &e) { lost += e.status() == HILOCK_NOT_HELD; });
    m.lock();
    m.extend(5s);
    CHECK(m.validity() > 1s);
    CHECK(m.check());
    m.unlock();

    m.lock();   // a 200 ms grant, outlived
    std::this_thread::sleep_for(400ms);
    CHECK(m.validity() == 0ms);   // a number: not "told" (see A LOSS ALREADY REPORTED)
    mutex thief(other, "cxx:exp", 300ms);
    thief.on_lost([&](const hilock_cpp::lost_error &) { lost += 10; });
    CHECK(thief.try_lock());
    m.unlock();   // never throws; says what happened, and tells the handler
    CHECK(m.unlock_status() == HILOCK_NOT_HELD && !m.owns_lock() && lost == 1);
    m.lock();     // waits until the thief's grant expires
    thief.unlock();
    CHECK(thief.unlock_status() == HILOCK_NOT_HELD && lost == 11);
    m.unlock();
    CHECK(m.unlock_status() == HILOCK_OK);

    m.lock();
    std::this_thread::sleep_for(400ms);
    CHECK(!m.check());   // the program was told: unlock() records it and calls nobody
    m.unlock();
    CHECK(m.unlock_status() == HILOCK_NOT_HELD && !m.owns_lock() && lost == 11);

    m.lock();
    std::this_thread::sleep_for(400ms);
    std::string w = expect_error(HILOCK_NOT_HELD, [&] { m.extend(1s); });
    CHECK(w.rfind("extend cxx:exp: ", 0) == 0 && w.find("cxx:exp", 8) == std::string::npos);  // the key once
    expect_error(HILOCK_NOT_HELD, [&] { m.release(); });
    CHECK(!m.owns_lock() && lost == 11);   // release() throws instead of calling the handler
    m.release();                           // not held: nothing to say
    ok("expired grant: unlock says NOT_HELD and calls on_lost (not after check() said false), release throws; extend, check");
}

static int global_calls;
static hilock_status global_status;
static void count_lost(const hilock_cpp::lost_error &e)
{
    global_calls++;
    global_status = e.status();
}

// A lock deleted behind its holder's back: each way of giving it back reports the loss.
static void lost_is_reported(const char *url)
{
    client c(url), other(url);
    mutex m(c, "cxx:lost", 5s);
    int calls = 0;
    hilock_status st = HILOCK_OK;
    std::string what, key;
    uint64_t fence = 0, lost_fence = 0;
    m.on_lost([&](const hilock_cpp::lost_error &e) {
        calls++;
        st = e.status();
        what = e.what();
        key = e.key();
        lost_fence = e.fence();
    });
    {
        std::lock_guard<mutex> g(m);   // held to the end: no call
        CHECK(m.owns_lock());
    }
    CHECK(calls == 0 && m.unlock_status() == HILOCK_OK);
    {
        std::lock_guard<mutex> g(m);
        fence = m.fence();
        del_behind(url, "cxx:lost");
    }
    CHECK(calls == 1 && st == HILOCK_NOT_HELD && m.unlock_status() == HILOCK_NOT_HELD);
    CHECK(key == "cxx:lost" && lost_fence == fence && fence > 0);
    CHECK(what.rfind("lock lost: ", 0) == 0 && what.find("cxx:lost") != std::string::npos);
    std::printf("lost: %s\n", what.c_str());
    {
        std::unique_lock<mutex> g(m, 1s);
        CHECK(g.owns_lock());
        del_behind(url, "cxx:lost");
    }
    CHECK(calls == 2);

    // the process-wide handler, for a mutex without its own; here from the mutex's destructor
    CHECK(hilock_cpp::get_lost_handler() == &hilock_cpp::default_lost_handler);
    CHECK(hilock_cpp::set_lost_handler(&count_lost) == &hilock_cpp::default_lost_handler);
    {
        mutex m2(c, "cxx:lost2", 5s);
        m2.lock();
        del_behind(url, "cxx:lost2");
    }
    CHECK(global_calls == 1 && global_status == HILOCK_NOT_HELD);
    {
        mutex m2(c, "cxx:lost2", 5s);
        std::lock_guard<mutex> g(m2);   // a normal unlock calls no handler either
    }
    CHECK(global_calls == 1);
    CHECK(hilock_cpp::set_lost_handler(nullptr) == &count_lost);
    CHECK(hilock_cpp::get_lost_handler() == &hilock_cpp::default_lost_handler);

    // release() throws lost_error instead
    m.lock();
    del_behind(url, "cxx:lost");
    try {
        m.release();
        CHECK(!"release() did not throw");
    } catch (const hilock_cpp::lost_error &e) {
        CHECK(e.status() == HILOCK_NOT_HELD && e.key() == "cxx:lost" && !m.owns_lock());
        CHECK(std::string(e.what()) == "lock lost: " + e.errmsg());
    }
    CHECK(calls == 2);
    ok("lost lock: lock_guard/unique_lock call on_lost, the process-wide handler, release() throws lost_error");
}

// hilock_cpp::guard: the scope's answer, without a handler.
static void guard_reports(const char *url)
{
    client c(url), other(url);
    mutex m(c, "cxx:lost", 5s);
    int calls = 0;
    m.on_lost([&](const hilock_cpp::lost_error &) { calls++; });
    {
        hilock_cpp::guard g(m);
        CHECK(g && m.owns_lock() && !g.lost());
        CHECK(g.release() == HILOCK_OK && !g.lost() && !m.owns_lock());
        CHECK(g.release() == HILOCK_EINVAL);   // released already
    }
    {
        hilock_cpp::guard g(m);
        del_behind(url, "cxx:lost");
        CHECK(!g.lost());   // no round trip: the validity still runs
        CHECK(g.release() == HILOCK_NOT_HELD && g.lost());
    }
    CHECK(calls == 0);   // the answer went to release()'s caller
    {
        hilock_cpp::guard g(m);
        del_behind(url, "cxx:lost");
    }   // ends holding it: m.unlock(), so the handler hears of it
    CHECK(calls == 1);
    mutex s(c, "cxx:lost", 200ms);
    s.on_lost([&](const hilock_cpp::lost_error &) { calls++; });
    {
        hilock_cpp::guard g(s);
        std::this_thread::sleep_for(400ms);
        CHECK(g.lost());   // the validity ran out: stop the work
        CHECK(g.release() == HILOCK_NOT_HELD && g.lost());
    }
    mutex holder(other, "cxx:lost", 5s);
    holder.lock();
    {
        hilock_cpp::guard g(m, 50ms);   // busy
        CHECK(!g && !g.owns_lock() && !g.lost() && g.release() == HILOCK_EINVAL);
    }
    holder.unlock();
    CHECK(calls == 1 && holder.unlock_status() == HILOCK_OK);
    ok("guard: release() returns OK / NOT_HELD (no handler), lost() after expiry, busy guard owns nothing");
}

// A loss the program was told of while it held the lock is not reported again when the scope
// gives it back: unlock() records NOT_HELD in unlock_status() and calls no handler.
static void told_loss_is_not_reported_again(const char *url)
{
    client c(url);
    mutex m(c, "cxx:told", 5s), s(c, "cxx:told2", 200ms);
    int calls = 0;
    auto count = [&](const hilock_cpp::lost_error &) { calls++; };
    m.on_lost(count);
    s.on_lost(count);
    {
        std::unique_lock<mutex> g(m);
        del_behind(url, "cxx:told");
        CHECK(!m.check());
    }
    CHECK(calls == 0 && m.unlock_status() == HILOCK_NOT_HELD && !m.owns_lock());
    {
        std::lock_guard<mutex> g(m);
        del_behind(url, "cxx:told");
        expect_error(HILOCK_NOT_HELD, [&] { m.extend(1s); });   // caught: the program saw it
    }
    CHECK(calls == 0 && m.unlock_status() == HILOCK_NOT_HELD);
    {
        hilock_cpp::guard g(s);
        std::this_thread::sleep_for(400ms);
        CHECK(g.lost());
    }
    CHECK(calls == 0 && s.unlock_status() == HILOCK_NOT_HELD);
    {
        mutex moved(c, "cxx:told", 5s);
        moved.on_lost(count);
        moved.lock();
        del_behind(url, "cxx:told");
        CHECK(!moved.check());
        mutex to(std::move(moved));   // what it was told moves with the grant
    }
    CHECK(calls == 0);
    {
        std::lock_guard<mutex> g(m);   // a new grant: told of nothing yet
        del_behind(url, "cxx:told");
    }
    CHECK(calls == 1 && m.unlock_status() == HILOCK_NOT_HELD);
    ok("a loss told by check() false, extend() throwing, guard::lost(): unlock records it, no handler");
}

static void keepalive(const char *url)
{
    client c(url);
    mutex m(c, "cxx:ka", 300ms);
    m.lock();
    m.keepalive();
    std::this_thread::sleep_for(700ms);
    CHECK(m.validity() > 0ms && m.check());
    m.unlock();
    CHECK(m.unlock_status() == HILOCK_OK);
    ok("keepalive renews until unlock");
}

static void threads_serialize(const char *url)
{
    // Relaxed: the lock (through Redis) is what orders the two threads; the split load/store
    // would lose increments if it did not.
    std::atomic<long> counter{0};
    auto worker = [&] {
        client c(url);
        mutex m(c, "cxx:counter", 5s);
        for (int i = 0; i < 100; i++) {
            std::unique_lock<mutex> g(m);
            long v = counter.load(std::memory_order_relaxed);
            std::this_thread::yield();
            counter.store(v + 1, std::memory_order_relaxed);
        }
    };
    std::thread t1(worker), t2(worker);
    t1.join();
    t2.join();
    CHECK(counter == 200);
    ok("two threads, one client each: std::unique_lock serializes (counter exact)");
}

using hilock_cpp::semaphore;
using hilock_cpp::shared_mutex;

// std::shared_lock holds shared grants together; std::unique_lock's exclusive one waits for
// both, and excludes them in turn; its fence exceeds theirs. One object holds one grant.
static void shared_and_exclusive(const char *url)
{
    client a(url), b(url), w(url);
    shared_mutex ra(a, "cxx:rw", 5s), rb(b, "cxx:rw", 5s), wx(w, "cxx:rw", 5s);
    uint64_t top;
    {
        std::shared_lock<shared_mutex> g1(ra);
        std::shared_lock<shared_mutex> g2(rb, 1s);   // try_lock_shared_for
        CHECK(g1.owns_lock() && g2.owns_lock() && ra.mode() == HILOCK_SHARED && rb.mode() == HILOCK_SHARED);
        CHECK(int_cmd(url, "ZCARD", "cxx:rw") == 3);   // two holders and the kind's marker
        CHECK(!wx.try_lock());
        std::unique_lock<shared_mutex> u(wx, std::try_to_lock);
        CHECK(!u.owns_lock() && !wx.owns_lock());
        CHECK(ra.fence() != rb.fence());
        top = std::max(ra.fence(), rb.fence());
    }
    CHECK(!ra.owns_lock() && ra.unlock_status() == HILOCK_OK && int_cmd(url, "EXISTS", "cxx:rw") == 0);
    {
        std::unique_lock<shared_mutex> u(wx, 1s);
        CHECK(u.owns_lock() && wx.mode() == HILOCK_EXCLUSIVE && wx.fence() > top);
        CHECK(!ra.try_lock_shared());   // an exclusive holder: no shared grant
        std::shared_lock<shared_mutex> s(rb, std::try_to_lock);
        CHECK(!s.owns_lock());
        CHECK(!ra.try_lock_shared_until(std::chrono::steady_clock::now() + 50ms));
        CHECK(int_cmd(url, "ZCARD", "cxx:rw") == 2);   // one holder and the marker
    }
    CHECK(int_cmd(url, "EXISTS", "cxx:rw") == 0);
    ra.lock_shared();
    std::string what = expect_error(HILOCK_EINVAL, [&] { ra.lock(); });
    CHECK(what == "lock cxx:rw: already held by this object");
    ra.unlock();   // gives back the grant held, shared here
    CHECK(!ra.owns_lock() && ra.unlock_status() == HILOCK_OK && int_cmd(url, "EXISTS", "cxx:rw") == 0);
    ok("shared_mutex: std::shared_lock together, std::unique_lock alone, try_lock false while shared, fence");
}

// A writer waiting on a thread of its own stops new shared grants; it gets the lock when the
// readers leave.
static void writer_waits_first(const char *url)
{
    client a(url), b(url);
    shared_mutex ra(a, "cxx:rw", 5s), rb(b, "cxx:rw", 5s);
    std::atomic<bool> wrote{false};
    ra.lock_shared();
    std::thread writer([&] {
        client w(url);
        shared_mutex wx(w, "cxx:rw", 5s);
        std::lock_guard<shared_mutex> g(wx);
        wrote = true;
    });
    for (int i = 0; i < 500 && int_cmd(url, "ZCARD", "{cxx:rw}:wq") == 0; i++) std::this_thread::sleep_for(10ms);
    CHECK(int_cmd(url, "ZCARD", "{cxx:rw}:wq") == 1);   // the writer waits
    CHECK(!rb.try_lock_shared() && !wrote);             // so a new reader does not pass it
    ra.unlock_shared();
    writer.join();   // woken by the release
    CHECK(wrote && rb.try_lock_shared());
    rb.unlock_shared();
    ok("shared_mutex: a waiting writer stops new readers, and gets the lock when they leave");
}

static void semaphore_limit(const char *url)
{
    client a(url), b(url), d(url);
    semaphore s1(a, "cxx:sem", 2, 5s), s2(b, "cxx:sem", 2, 5s), s3(d, "cxx:sem", 2, 5s);
    CHECK(s1.limit() == 2);
    s1.acquire();
    CHECK(s2.try_acquire());
    CHECK(int_cmd(url, "ZCARD", "cxx:sem") == 3);   // two permits and the kind's marker
    CHECK(!s3.try_acquire() && !s3.try_acquire_for(100ms) && !s3.owns_lock());
    CHECK(s1.fence() != s2.fence() && s1.token() != s2.token());
    uint64_t top = std::max(s1.fence(), s2.fence());
    s1.release();
    {
        std::unique_lock<semaphore> g(s3, 1s);
        CHECK(g.owns_lock() && s3.fence() > top);
        CHECK(!s1.try_acquire_until(std::chrono::steady_clock::now() - 1s));   // two held again
    }
    s2.release();
    CHECK(int_cmd(url, "EXISTS", "cxx:sem") == 0);
    ok("semaphore: limit 2 grants two permits, the third after a release; std::unique_lock; fences grow");
}

static void kinds_bad_input(const char *url)
{
    client c(url), o(url);
    semaphore zero(c, "cxx:semerr", 0, 5s), big(c, "cxx:semerr", HILOCK_SEM_LIMIT_MAX + 1, 5s);
    std::string w = expect_error(HILOCK_EINVAL, [&] { zero.acquire(); });
    CHECK(w.rfind("acquire cxx:semerr: ", 0) == 0 && w.size() > 20);
    std::printf("limit 0: %s\n", w.c_str());
    try {
        (void)big.try_acquire();
        CHECK(!"no error");
    } catch (const hilock_cpp::error &e) {
        CHECK(e.status() == HILOCK_EINVAL && e.errmsg() == c.errmsg());
        CHECK(std::string(e.what()).rfind("try_acquire cxx:semerr: ", 0) == 0);
    }
    CHECK(!zero.owns_lock() && !big.owns_lock() && int_cmd(url, "EXISTS", "cxx:semerr") == 0);
    semaphore s(c, "cxx:kind", 2, 5s);
    shared_mutex r(o, "cxx:kind", 5s);
    s.acquire();
    try {
        (void)r.try_lock_shared();
        CHECK(!"no error");
    } catch (const hilock_cpp::error &e) {   // a semaphore asked as a shared lock: the kind named
        std::printf("semaphore asked as shared: %s\n", e.what());
        const std::string tail = "WRONGTYPE: cxx:kind holds a semaphore, not a shared/exclusive lock";
        CHECK(e.status() == HILOCK_EREPLY && e.errmsg() == o.errmsg());
        CHECK(e.errmsg().size() > tail.size() && e.errmsg().compare(e.errmsg().size() - tail.size(), tail.size(), tail) == 0);
    }
    CHECK(!r.owns_lock() && int_cmd(url, "ZCARD", "cxx:kind") == 2);   // nothing written
    s.release();
    ok("bad input: limit out of range throws EINVAL from acquire, another kind is named; nothing written");
}

// The default handler: it says why on stderr and ends the program (test_cxx.c checks both).
static int lost_default(const char *url)
{
    client c(url);
    mutex m(c, "cxx:default", 5s);
    {
        std::lock_guard<mutex> g(m);
        del_behind(url, "cxx:default");
    }
    std::printf("lost-default: still running\n");
    return 0;
}

// Under the default handler, a program that looked and returned early carries on: the loss it
// was told of (check() false, extend() throwing, guard::lost()) does not end it at scope exit.
static bool work_checked(mutex &m, const char *url)
{
    std::unique_lock<mutex> g(m);
    del_behind(url, m.key().c_str());
    if (!m.check()) return false;
    return true;
}
static bool work_extended(mutex &m, const char *url)
{
    std::lock_guard<mutex> g(m);
    del_behind(url, m.key().c_str());
    try {
        m.extend(5s);
    } catch (const hilock_cpp::error &e) {
        if (e.status() == HILOCK_NOT_HELD) return false;
        throw;
    }
    return true;
}
static bool work_guarded(mutex &m)
{
    hilock_cpp::guard g(m);
    std::this_thread::sleep_for(400ms);
    if (g.lost()) return false;
    return true;
}
static int lost_told(const char *url)
{
    client c(url);
    mutex m(c, "cxx:told", 5s), s(c, "cxx:told2", 200ms);
    CHECK(!work_checked(m, url) && m.unlock_status() == HILOCK_NOT_HELD);
    CHECK(!work_extended(m, url) && m.unlock_status() == HILOCK_NOT_HELD);
    CHECK(!work_guarded(s) && s.unlock_status() == HILOCK_NOT_HELD);
    std::printf("lost-told: still running\n");
    return 0;
}

// The semaphore and the shared/exclusive lock (Redis 3.2+: test_cxx.c skips it before).
static int kinds(const char *url)
{
    try {
        shared_and_exclusive(url);
        writer_waits_first(url);
        semaphore_limit(url);
        kinds_bad_input(url);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "unexpected exception: %s\n", e.what());
        return 1;
    }
    std::printf("ok kinds\n");
    return 0;
}

// The observer and the counters (cxx_lock URL DEAD_URL observe): a lambda, a functor and a
// std::function each see the client's events; the observer follows the client through a move;
// a call back into the client from inside it throws EINVAL; stats() counts per outcome and
// merges; prometheus() writes the labels first.
static int observe(const char *url)
{
    try {
        client c(url), other(url);
        int seen[HILOCK_EVENT_ERROR + 1] = {};
        std::string key;
        hilock_status inner = HILOCK_OK;
        c.observe([&](const hilock_event &e) {
            if (e.kind >= 0 && e.kind <= HILOCK_EVENT_ERROR) seen[e.kind]++;
            if (e.kind != HILOCK_EVENT_ACQUIRE_GRANTED) return;
            key.assign(e.key, e.keylen);
            try {
                (void)c.stats();   // refused: no calls into the client from its observer
            } catch (const hilock_cpp::error &x) {
                inner = x.status();
            }
        });
        mutex m(c, "cxx:obs", 5s), busy(other, "cxx:obs", 5s);
        {
            std::lock_guard<mutex> g(m);
            CHECK(!busy.try_lock());
        }
        CHECK(seen[HILOCK_EVENT_ACQUIRE_START] == 1 && seen[HILOCK_EVENT_ACQUIRE_GRANTED] == 1);
        CHECK(seen[HILOCK_EVENT_RELEASE] == 1 && seen[HILOCK_EVENT_ACQUIRE_BUSY] == 0);
        CHECK(key == "cxx:obs" && inner == HILOCK_EINVAL);
        hilock_stats s = c.stats(), o = other.stats();
        CHECK(s.acquire_ok == 1 && s.release_ok == 1 && s.acquire_busy == 0 && s.acquire_wait.count == 1);
        CHECK(s.round_trips >= 2 && o.acquire_busy == 1 && o.acquire_ok == 0);
        hilock_stats_merge(&s, &o);
        CHECK(s.acquire_ok == 1 && s.acquire_busy == 1);
        ok("observe lambda, stats");

        struct counter {
            int *hits;
            void operator()(const hilock_event &) const { ++*hits; }
        };
        int hits = 0, fn_hits = 0;
        c.observe(counter{ &hits });
        client moved(std::move(c));
        mutex m2(moved, "cxx:obs", 5s);
        m2.lock();
        m2.unlock();
        CHECK(hits >= 3);   // start, granted, release (and round trips' events, if any)
        std::function<void(const hilock_event &)> f = [&fn_hits](const hilock_event &) { ++fn_hits; };
        moved.observe(f);
        m2.lock();
        m2.unlock();
        CHECK(fn_hits >= 3);
        const int before = hits, fn_before = fn_hits;
        moved.stop_observing();
        m2.lock();
        m2.unlock();
        CHECK(hits == before && fn_hits == fn_before);
        ok("observe functor, std::function, after a move, stopped");

        const std::string text = moved.prometheus("app=\"cxx\"");
        CHECK(text.find("hilock_acquires_total{app=\"cxx\",outcome=\"ok\"} 4\n") != std::string::npos);
        CHECK(text.find("hilock_acquire_wait_seconds_count{app=\"cxx\"} 4\n") != std::string::npos);
        CHECK(client::stats_prometheus(other.stats()).find("hilock_acquires_total{outcome=\"busy\"} 1\n") !=
              std::string::npos);
        expect_error(HILOCK_EINVAL, [&] { (void)c.stats(); });   // moved from
        ok("prometheus");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "unexpected exception: %s\n", e.what());
        return 1;
    }
    std::printf("ok observe\n");
    return 0;
}

// A waiting lock() ended from another thread: client::cancel(), and (C++20) a std::jthread's
// stop request through lock(std::stop_token). Both throw error ECANCELED; nothing is held.
static void cancel_ends_a_wait(const char *url)
{
    client h(url), c(url);
    mutex held(h, "cxx:cancel", 30s);
    held.lock();
    {
        mutex m(c, "cxx:cancel", 30s);
        std::thread t([&c] {
            std::this_thread::sleep_for(300ms);
            c.cancel();
        });
        std::string why = expect_error(HILOCK_ECANCELED, [&] { m.lock(); });
        t.join();
        CHECK(why.find("cancelled") != std::string::npos);
        CHECK(!m.owns_lock());
    }
#ifdef __cpp_lib_jthread
    {
        mutex m(c, "cxx:cancel", 30s);
        std::jthread t([&m](std::stop_token st) {
            expect_error(HILOCK_ECANCELED, [&] { m.lock(st); });
        });
        std::this_thread::sleep_for(300ms);
        t.request_stop();
        t.join();
        CHECK(!m.owns_lock());
    }
    ok("cancel (client::cancel, std::stop_token)");
#else
    ok("cancel (client::cancel)");
#endif
    held.unlock();
    CHECK(int_cmd(url, "EXISTS", "cxx:cancel") == 0);
}

// mutex::guarded and semaphore::guarded: a write while held, a refused command's error reply
// (returned, not thrown), NOT_HELD thrown once the key is gone (nothing ran), EINVAL unheld.
static void guarded_commands(const char *url)
{
    client c(url);
    mutex m(c, "cxx:guarded", 30s);
    semaphore s(c, "cxx:gsem", 2, 30s);
    expect_error(HILOCK_EINVAL, [&] { m.guarded({"SET", "cxx:gjob", "x"}); });
    m.lock();
    hilock_cpp::reply r = m.guarded({"SET", "cxx:gjob", "done"});
    CHECK(r && r->type == HILOCK_REPLY_STATUS && std::string(r->str, r->len) == "OK");
    r = m.guarded({"INCR", "cxx:gjob"});
    CHECK(r && r->type == HILOCK_REPLY_ERROR);
    CHECK(int_cmd(url, "EXISTS", "cxx:gjob") == 1);
    del_behind(url, "cxx:guarded");
    std::string what = expect_error(HILOCK_NOT_HELD, [&] { m.guarded({"DEL", "cxx:gjob"}); });
    CHECK(what.find("nothing ran") != std::string::npos);
    CHECK(int_cmd(url, "EXISTS", "cxx:gjob") == 1);
    m.unlock();   // (told: no handler)
    s.acquire();
    r = s.guarded({std::string("DEL"), std::string("cxx:gjob")});
    CHECK(r && r->type == HILOCK_REPLY_INTEGER && r->integer == 1);
    s.unlock();
    ok("guarded");
}

int main(int argc, char **argv)
{
    if (argc == 4 && std::strcmp(argv[3], "lost-default") == 0) return lost_default(argv[1]);
    if (argc == 4 && std::strcmp(argv[3], "lost-told") == 0) return lost_told(argv[1]);
    if (argc == 4 && std::strcmp(argv[3], "kinds") == 0) return kinds(argv[1]);
    if (argc == 4 && std::strcmp(argv[3], "observe") == 0) return observe(argv[1]);
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_lock URL DEAD_URL [lost-default | lost-told | kinds | observe]\n");
        return 2;
    }
    try {
        try_lock_and_busy(argv[1]);
        std_guards(argv[1]);
        raii_and_move(argv[1]);
        errors(argv[1], argv[2]);
        expiry_extend_check(argv[1]);
        lost_is_reported(argv[1]);
        guard_reports(argv[1]);
        told_loss_is_not_reported_again(argv[1]);
        keepalive(argv[1]);
        threads_serialize(argv[1]);
        cancel_ends_a_wait(argv[1]);
        guarded_commands(argv[1]);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "unexpected exception: %s\n", e.what());
        return 1;
    }
    // Left for tests/test_cxx.c to see: a grant from lock() in a scope that ended by an exception.
    try {
        client c(argv[1]);
        mutex m(c, "cxx:thrown", 30s);
        m.lock();
        throw std::runtime_error("work failed");
    } catch (const std::runtime_error &) {
    }
    std::printf("ok all\n");
    return 0;
}
