// cxx_lock.cpp URL DEAD_URL -- include/hilock.hpp against a real server (run by tests/test_cxx.c,
// which checks what it leaves in Redis). Built with g++ -std=c++17 -Wall -Wextra -Werror.
// Prints one line per check; exits 1 at the first failure.
#include <hilock.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
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

// The standard requirements, at compile time.
static_assert(!std::is_copy_constructible_v<mutex> && !std::is_copy_assignable_v<mutex>, "move-only");
static_assert(std::is_nothrow_move_constructible_v<mutex> && std::is_nothrow_move_assignable_v<mutex>, "");
static_assert(!std::is_copy_constructible_v<client> && std::is_nothrow_move_constructible_v<client>, "");
static_assert(std::is_nothrow_destructible_v<mutex> && noexcept(std::declval<mutex &>().unlock()),
              "BasicLockable: unlock and the destructor never throw");
static_assert(std::is_base_of_v<std::runtime_error, hilock_cpp::error>, "");

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
    client c(url);
    mutex m(c, "cxx:err", 5s);
    m.lock();
    expect_error(HILOCK_EINVAL, [&] { m.lock(); });   // already held by this object
    expect_error(HILOCK_EINVAL, [&] { (void)m.try_lock(); });
    CHECK(m.owns_lock());
    m.unlock();
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
    ok("errors: bad URL, twice locked, not held, bad ttl, dead server named");
}

static void expiry_extend_check(const char *url)
{
    client c(url), other(url);
    mutex m(c, "cxx:exp", 200ms);
    m.lock();
    m.extend(5s);
    CHECK(m.validity() > 1s);
    CHECK(m.check());
    m.unlock();

    m.lock();   // a 200 ms grant, outlived
    std::this_thread::sleep_for(400ms);
    CHECK(m.validity() == 0ms);
    CHECK(!m.check());
    mutex thief(other, "cxx:exp", 300ms);
    CHECK(thief.try_lock());
    m.unlock();   // never throws; says what happened
    CHECK(m.unlock_status() == HILOCK_NOT_HELD && !m.owns_lock());
    m.lock();     // waits until the thief's grant expires
    thief.unlock();
    CHECK(thief.unlock_status() == HILOCK_NOT_HELD);
    m.unlock();
    CHECK(m.unlock_status() == HILOCK_OK);

    m.lock();
    std::this_thread::sleep_for(400ms);
    expect_error(HILOCK_NOT_HELD, [&] { m.release(); });
    CHECK(!m.owns_lock());
    ok("expired grant: unlock says NOT_HELD, release throws; extend, check");
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

int main(int argc, char **argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: cxx_lock URL DEAD_URL\n");
        return 2;
    }
    try {
        try_lock_and_busy(argv[1]);
        std_guards(argv[1]);
        raii_and_move(argv[1]);
        errors(argv[1], argv[2]);
        expiry_extend_check(argv[1]);
        keepalive(argv[1]);
        threads_serialize(argv[1]);
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
