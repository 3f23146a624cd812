/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock.hpp -- C++17 RAII over the C API (hilock.h), header-only: nothing to link but
 * libhilock itself.
 *
 *     hilock_cpp::client c("redis://127.0.0.1:6379");
 *     hilock_cpp::mutex l(c, "jobs:nightly", std::chrono::seconds(30));   // ttl of each grant
 *     {
 *         std::unique_lock<hilock_cpp::mutex> g(l, std::chrono::seconds(5));   // try_lock_for
 *         if (!g) return;                        // someone else had it for 5 s
 *         ... work; pass l.fence() to the protected resource ...
 *     }                                           // released here (lost? see below)
 *
 * hilock_cpp::mutex meets the standard Lockable and TimedLockable requirements (lock, try_lock,
 * try_lock_for, try_lock_until, unlock), so std::unique_lock, std::scoped_lock and
 * std::lock work with it. The C rules hold: a client, and the locks made from it, are used
 * by one thread at a time (one client per thread); the client must outlive its locks.
 *
 * THREADS: despite its name, hilock_cpp::mutex is NOT a std::mutex to share between threads.
 * It excludes other processes and other clients, not the threads of this one: nothing here
 * may be used from two threads at once -- not a mutex, not two mutexes of one client, not the
 * client. Give each thread its own client and its own mutex objects (they may all name the
 * same key: then they exclude each other, through Redis). A call that catches a second thread
 * inside the client throws error with HILOCK_EINVAL, "client used from two threads at once";
 * it never corrupts the client's connection, but an unlock() refused that way (the destructor's
 * too) only leaves EINVAL in unlock_status(), and the grant stays held until its ttl runs out.
 *
 * NOT RE-ENTRANT: a client that holds a key and asks for it again neither stacks nor waits for
 * itself: lock() and try_lock* throw error with HILOCK_EINVAL at once, what() "CALL KEY: this
 * client already holds KEY (hilock locks are not re-entrant)" (CALL: lock, try_lock or
 * try_lock_for). A second mutex object of the same client naming the same key is that case:
 * while one holds the key (until its unlock, release or destruction, even after a loss), the
 * other's lock/try_lock* throw it. The same object locked twice throws EINVAL "already held by
 * this object". Another client, even in this thread, waits as usual.
 *
 * SEMAPHORES AND SHARED/EXCLUSIVE LOCKS: hilock_cpp::semaphore (hilock_sem_acquire) and
 * hilock_cpp::shared_mutex (hilock_rw_acquire; std::shared_lock works with it) are mutexes over
 * a permit or a shared/exclusive grant: all that is said here of mutex holds for them (see each
 * class below).
 *
 * The namespace is hilock_cpp, not hilock: in C++ the C type `hilock` (the held lock) already
 * owns that name.
 *
 * Errors are exceptions (hilock_cpp::error: the status and the client's errmsg). BUSY is not an
 * error: try_lock* return false. unlock() and the destructors never throw.
 *
 * A LOST LOCK IS NEVER SILENT. A grant can end before its holder gives it back: its ttl ran out
 * (a pause, a keepalive that gave up), someone deleted it, a failover dropped it. The release
 * then finds it gone (HILOCK_NOT_HELD or HILOCK_LOST), and the work it guarded may have
 * overlapped another holder's. Each way of giving a lock back reports that:
 *   - release() throws lost_error (an error; other failures throw plain error);
 *   - guard::release() returns the status ([[nodiscard]]); guard::lost() asks at any time;
 *   - unlock(), as std::lock_guard / std::unique_lock / std::scoped_lock and the destructors
 *     call it, cannot throw: it calls the mutex's on_lost handler with the lost_error, or, if it
 *     has none, the process-wide one (set_lost_handler), by default default_lost_handler: one
 *     line on stderr, then std::terminate().
 * Why terminate by default: a lock is taken to exclude others, and a program that lost it must
 * not carry on as if it had not; an error a destructor cannot throw is, in C++, std::terminate
 * (what a throwing destructor gets), and a supervisor's restart is the safe outcome. A program
 * that can cope says so once: set_lost_handler(its handler), or m.on_lost(...) per mutex, or it
 * gives locks back with release() / guard::release(). A handler must not throw (unlock() is
 * noexcept: a throw ends in std::terminate). Releases that fail for other reasons (EIO,
 * ETIMEDOUT, EINVAL...: the outcome is unknown, and the key lives until its ttl) do not call
 * it: their status is in unlock_status().
 *
 * A LOSS ALREADY REPORTED is not reported again. Once a call has told the program, while the
 * grant was held, that it is gone, unlock() (so the std guards and the destructors) gives it
 * back, leaves NOT_HELD or LOST in unlock_status(), and calls no handler: the program has seen
 * the loss and is handling it, as in
 *     std::unique_lock<hilock_cpp::mutex> g(m);
 *     ...
 *     if (!m.check()) return;                     // no handler, no terminate at the brace
 * The calls that tell, for the grant they are made on:
 *   - check() returning false (NOT_HELD);
 *   - check(), extend() or keepalive() throwing error with status() NOT_HELD or LOST (caught
 *     or not: an exception that leaves the scope has told the code that catches it);
 *   - guard::lost() returning true.
 * Nothing else tells: not validity() reaching 0 (a number programs read to log or to plan
 * work, so reading it is no sign the loss was acted on; ask guard::lost() or check() for
 * the answer), not owns_lock() or fence(), not errors of other statuses (EIO, ETIMEDOUT:
 * the outcome is unknown). It holds for that grant only: the next lock() starts untold.
 * release() and guard::release() are asked for the answer, so they give it as always.
 */
#ifndef HILOCK_HPP
#define HILOCK_HPP

/* MSVC keeps __cplusplus at 199711L unless /Zc:__cplusplus; _MSVC_LANG gives its real level. */
#if (defined(_MSVC_LANG) && _MSVC_LANG < 201703L) || \
    (!defined(_MSVC_LANG) && (!defined(__cplusplus) || __cplusplus < 201703L))
#error "hilock.hpp needs C++17 (compile with -std=c++17 or later; MSVC: /std:c++17); from C, include hilock.h"
#else

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#if __cplusplus >= 202002L && defined(__has_include)
#if __has_include(<stop_token>)
#include <stop_token>   /* mutex::lock(std::stop_token) */
#endif
#endif

#include "hilock.h"
#include "hilock_observe.h"

namespace hilock_cpp {

namespace detail {
/* The library's detail without the key it starts with ("KEY: ..." or "release KEY: ..."), as
 * what() names the key already: "release jobs: expired ...", not "release jobs: release jobs: ...". */
inline std::string after_key(const std::string &msg, const std::string &key)
{
    const std::string k = key + ": ";
    if (key.empty()) return msg;
    if (msg.compare(0, k.size(), k) == 0) return msg.substr(k.size());
    std::string::size_type sp = msg.find(' ');
    if (sp != std::string::npos && msg.find(':') > sp && msg.compare(sp + 1, k.size(), k) == 0)
        return msg.substr(sp + 1 + k.size());
    return msg;
}
}  // namespace detail

/* A failed call: status() is the hilock_status, errmsg() the detail the library gave
 * (which server, why); what() is "<what was done> KEY: <errmsg or strerror(status)>", the key
 * named once. */
class error : public std::runtime_error {
public:
    error(hilock_status status, const std::string &what, const std::string &errmsg, const std::string &key = "")
        : std::runtime_error(what + ": " + (errmsg.empty() ? hilock_strerror(status) : detail::after_key(errmsg, key))),
          status_(status), errmsg_(errmsg) {}
    hilock_status status() const noexcept { return status_; }
    const std::string &errmsg() const { return errmsg_; }

private:
    hilock_status status_;
    std::string errmsg_;
};

/* A grant found gone when it was given back (status() NOT_HELD or LOST): the work it guarded may
 * have overlapped another holder's. key() and fence() name that grant; what() is
 * "lock lost: <errmsg>" (the library's detail names the key and why). Thrown by
 * mutex::release(); handed to the on_lost handlers by unlock() and the destructors. */
class lost_error : public error {
public:
    lost_error(hilock_status status, std::string key, uint64_t fence, const std::string &errmsg)
        : error(status, errmsg.empty() ? "lock lost: " + key : "lock lost", errmsg), key_(std::move(key)),
          fence_(fence) {}
    const std::string &key() const noexcept { return key_; }
    uint64_t fence() const noexcept { return fence_; }   /* the lost grant's fencing token */

private:
    std::string key_;
    uint64_t fence_;
};

/* What unlock() calls when it finds its grant lost (see A LOST LOCK IS NEVER SILENT). */
using lost_handler = void (*)(const lost_error &);

/* The default: "hilock: lock lost: ... (fence N): ..." on stderr, then std::terminate(). */
[[noreturn]] inline void default_lost_handler(const lost_error &e) noexcept
{
    std::fprintf(stderr,
                 "hilock: %s (fence %" PRIu64 "): the work it guarded may have overlapped another holder; "
                 "terminating (hilock_cpp::set_lost_handler or mutex::on_lost handles a loss instead)\n",
                 e.what(), e.fence());
    std::terminate();
}

namespace detail {
inline std::atomic<lost_handler> lost_handler_slot{nullptr};   /* nullptr: the default */
}

/* The process-wide handler, for every mutex without its own on_lost (as std::set_terminate):
 * returns the previous one; nullptr restores default_lost_handler. Any thread may call it. */
inline lost_handler set_lost_handler(lost_handler h) noexcept
{
    lost_handler old = detail::lost_handler_slot.exchange(h);
    return old ? old : &default_lost_handler;
}
inline lost_handler get_lost_handler() noexcept
{
    lost_handler h = detail::lost_handler_slot.load();
    return h ? h : &default_lost_handler;
}

/* Owns one hilock_client. Move-only. Its events and counters (hilock_observe.h): observe() and
 * stats() below. */
class client {
public:
    /* One server URL (hilock_client_open). Throws error (EINVAL: a bad URL, ENOMEM). */
    explicit client(const std::string &url) : c_(nullptr)
    {
        hilock_status st = hilock_client_open(url.c_str(), &c_);
        if (st != HILOCK_OK) throw error(st, "hilock_client_open", hilock_last_config_error());
    }
    /* Any options (Redlock, Sentinel, bridge...): start from hilock_options_init(). */
    explicit client(const hilock_options &o) : c_(nullptr)
    {
        hilock_status st = hilock_client_new(&o, &c_);
        if (st != HILOCK_OK) throw error(st, "hilock_client_new", hilock_last_config_error());
    }
    client(client &&o) noexcept : c_(std::exchange(o.c_, nullptr)), observers_(std::move(o.observers_)) {}
    client &operator=(client &&o) noexcept
    {
        if (this != &o) {
            hilock_client_free(c_);   /* first: its keepalives may call the observers below */
            c_ = std::exchange(o.c_, nullptr);
            observers_ = std::move(o.observers_);
        }
        return *this;
    }
    client(const client &) = delete;
    client &operator=(const client &) = delete;
    ~client() { hilock_client_free(c_); }

    hilock_client *get() const noexcept { return c_; }   /* nullptr once moved from */
    std::string errmsg() const { return hilock_client_errmsg(c_); }
    /* hilock_cancel: the blocking call in progress on this client (or its next acquire) ends
     * with error HILOCK_ECANCELED. From any thread or a signal handler. */
    void cancel() noexcept { hilock_cancel(c_); }

    /* The observer (hilock_set_observer): f(const hilock_event &) is called with each event of
     * this client -- a copyable callable (it is kept in a std::function, so a move-only one,
     * e.g. a lambda owning a std::unique_ptr, does not compile): a lambda, a function, a
     * std::function, a functor; it is copied or moved in, and lives as long as the client
     * (moves with it). Replaces the one before, which is kept until the client is destroyed
     * too (a keepalive may still call it): set an observer once per client, not once per
     * lock. The C rules hold (hilock_observe.h): it runs on the calling thread, the loop's,
     * or a keepalive's thread (RENEWAL, LOST...: then on two threads at once), inside the
     * call; it must not call into hilock (such a call throws error with HILOCK_EINVAL), must
     * not throw (it is called from C, noexcept: a throw ends in std::terminate), and copies
     * what it keeps of the event (its strings live for the call). Throws error (EINVAL: a
     * moved-from client, from inside an observer, another thread inside the client). */
    template <class F>
    void observe(F &&f)
    {
        auto fn = std::make_unique<std::function<void(const hilock_event &)>>(std::forward<F>(f));
        observers_.reserve(observers_.size() + 1);   /* (may throw: before the client points at fn) */
        hilock_status st = hilock_set_observer(c_, &client::call_observer, fn.get());
        if (st != HILOCK_OK) throw error(st, "hilock_set_observer", c_ ? hilock_client_errmsg(c_) : "");
        /* the ones before are kept, not destroyed: a keepalive started under one calls it
         * until its lock is released (hilock_observe.h) */
        observers_.push_back(std::move(fn));
    }
    /* No observer any more (hilock_set_observer(c, NULL, NULL)); a keepalive already running
     * keeps calling the one it started with. Throws error as observe(). */
    void stop_observing()
    {
        hilock_status st = hilock_set_observer(c_, nullptr, nullptr);
        if (st != HILOCK_OK) throw error(st, "hilock_set_observer", c_ ? hilock_client_errmsg(c_) : "");
    }

    /* A copy of the client's counters and histograms (hilock_client_stats): totals per
     * outcome, round trips, connections, failovers, acquire-wait and round-trip histograms.
     * Add clients up with hilock_stats_merge, write them with hilock_stats_prometheus (or
     * prometheus() below). Throws error (EINVAL: a moved-from client, from inside an
     * observer, another thread inside the client). */
    hilock_stats stats() const
    {
        hilock_stats s{};
        hilock_status st = hilock_client_stats(c_, &s);
        if (st != HILOCK_OK) throw error(st, "hilock_client_stats", c_ ? hilock_client_errmsg(c_) : "");
        return s;
    }
    /* stats() in the Prometheus text format (hilock_stats_prometheus); labels as there
     * (`app="x"` or empty). Throws error as stats(), std::bad_alloc. */
    std::string prometheus(const std::string &labels = "") const { return stats_prometheus(stats(), labels); }
    static std::string stats_prometheus(const hilock_stats &s, const std::string &labels = "")
    {
        std::string out(4096, '\0');
        int n = hilock_stats_prometheus(&s, &out[0], out.size(), labels.c_str());
        if (n >= 0 && static_cast<size_t>(n) >= out.size()) {   /* cut short: n is what it needs */
            out.assign(static_cast<size_t>(n) + 1, '\0');
            n = hilock_stats_prometheus(&s, &out[0], out.size(), labels.c_str());
        }
        out.resize(n > 0 ? static_cast<size_t>(n) : 0);
        return out;
    }

private:
    static void call_observer(const hilock_event *e, void *arg) noexcept
    {
        (*static_cast<std::function<void(const hilock_event &)> *>(arg))(*e);
    }

    hilock_client *c_;
    std::vector<std::unique_ptr<std::function<void(const hilock_event &)>>> observers_;
};

/* A guarded command's reply (mutex::guarded, hilock_guarded_command), owned: freed with it. */
struct reply_free {
    void operator()(hilock_reply *r) const noexcept { hilock_reply_free(r); }
};
using reply = std::unique_ptr<hilock_reply, reply_free>;

/* One key on one client, taken and given back any number of times; holds at most one grant.
 * ONE THREAD AT A TIME, with its client (see THREADS at the top): to lock from several
 * threads, give each thread its own client and mutex; never share one across threads.
 * Each grant lasts `ttl` (the constructor's) unless extend() or keepalive() prolong it: a
 * holder that outlives the ttl has lost the lock (validity() is 0; unlock() then finds it
 * gone, and calls the on_lost handler, unless the program was told: A LOSS ALREADY REPORTED).
 * Move-only (what the program was told moves with the grant); a lock destroyed while held is
 * released as unlock() does (an untold loss calls the handler; other errors are ignored). */
class mutex {
public:
    /* Nothing is sent until the first lock/try_lock*. c must outlive this object. */
    mutex(client &c, std::string key, std::chrono::milliseconds ttl) : mutex(c, std::move(key), ttl, kind::lock, 0) {}
    mutex(mutex &&o) noexcept
        : c_(o.c_), key_(std::move(o.key_)), ttl_(o.ttl_), kind_(o.kind_), limit_(o.limit_), mode_(o.mode_),
          l_(std::exchange(o.l_, nullptr)), told_(std::exchange(o.told_, false)), unlocked_(o.unlocked_),
          errmsg_(std::move(o.errmsg_)), on_lost_(std::move(o.on_lost_)) {}
    /* Releases what this object held (as unlock()), then takes over o's grant and handler. */
    mutex &operator=(mutex &&o) noexcept
    {
        if (this != &o) {
            unlock();
            c_ = o.c_;
            key_ = std::move(o.key_);
            ttl_ = o.ttl_;
            kind_ = o.kind_;
            limit_ = o.limit_;
            mode_ = o.mode_;
            l_ = std::exchange(o.l_, nullptr);
            told_ = std::exchange(o.told_, false);
            unlocked_ = o.unlocked_;
            errmsg_ = std::move(o.errmsg_);
            on_lost_ = std::move(o.on_lost_);
        }
        return *this;
    }
    mutex(const mutex &) = delete;
    mutex &operator=(const mutex &) = delete;
    ~mutex() { unlock(); }

    /* Wait as long as it takes (HILOCK_WAIT_FOREVER); each call is still bounded by the
     * client's timeouts when a server fails. Throws error on any failure (EIO, ETIMEDOUT,
     * ENOQUORUM...), and EINVAL if this object already holds the lock. */
    void lock() { (void)acquire(HILOCK_WAIT_FOREVER, "lock"); }

#ifdef __cpp_lib_jthread
    /* lock(), until st is asked to stop (a std::jthread's): then the wait ends, through
     * hilock_cancel on the client, with error HILOCK_ECANCELED thrown (at once when the stop
     * was asked before). The client is cancelled, not this mutex: one wait per client. */
    void lock(std::stop_token st)
    {
        std::stop_callback cb(st, [this]() noexcept { hilock_cancel(c_); });
        (void)acquire(HILOCK_WAIT_FOREVER, "lock");
    }
#endif

    /* One attempt: true if granted, false if someone else holds it. Throws on errors. */
    bool try_lock() { return acquire(0, "try_lock"); }

    /* Wait up to d (rounded up to a millisecond; <= 0 = one attempt). */
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
    {
        return acquire(wait_of(d), "try_lock_for");
    }

    /* Wait until t by t's clock (a time already passed = one attempt). */
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return try_lock_for(t - Clock::now());
    }

    /* Release (the C hilock_release) and forget the grant. Never throws, as Lockable requires:
     * the outcome is in unlock_status() (OK; NOT_HELD: it expired or was taken meanwhile, so
     * the work it protected may have overlapped another holder's; LOST; or an error, after
     * which the key lives until its ttl). NOT_HELD and LOST also call the on_lost handler
     * (this mutex's, else the process-wide one: by default stderr + std::terminate), unless
     * the program was already told of that loss (A LOSS ALREADY REPORTED, at the top). No-op
     * when not held. release() throws instead, guard::release() returns the status. */
    void unlock() noexcept
    {
        uint64_t f = fence();
        bool told = told_;
        if (give_back() && lost(unlocked_) && !told) {
            lost_error e(unlocked_, key_, f, errmsg_);
            if (on_lost_) on_lost_(e);
            else get_lost_handler()(e);
        }
    }

    /* Release and forget the grant, throwing instead of calling a handler: lost_error when it
     * was found gone (NOT_HELD, LOST; told before or not), error on the other failures. No-op
     * when not held. */
    void release()
    {
        uint64_t f = fence();
        if (!give_back() || unlocked_ == HILOCK_OK) return;
        if (lost(unlocked_)) throw lost_error(unlocked_, key_, f, errmsg_);
        throw error(unlocked_, "release " + key_, errmsg_, key_);
    }

    /* The status of the last unlock() or release() (HILOCK_OK before any). */
    hilock_status unlock_status() const noexcept { return unlocked_; }

    /* This mutex's own loss handler, called by unlock() instead of the process-wide one; it may
     * capture state (a flag, a logger). An empty function restores the process-wide one. It
     * must not throw. Moves with the mutex. */
    void on_lost(std::function<void(const lost_error &)> f) noexcept { on_lost_ = std::move(f); }

    /* Prolong the grant to ttl from now (hilock_extend); the constructor's ttl is unchanged
     * for later grants. Throws error (NOT_HELD, LOST, ...; EINVAL when not held); NOT_HELD
     * and LOST tell the program of the loss (A LOSS ALREADY REPORTED). */
    void extend(std::chrono::milliseconds ttl) { grant_status(hilock_extend(need(), ttl.count()), "extend"); }

    /* Ask the server(s) whether the grant is still ours: true if so, false if NOT_HELD;
     * throws on LOST and errors. false and LOST tell the program of the loss (A LOSS ALREADY
     * REPORTED: unlock() then calls no handler). */
    bool check()
    {
        hilock_status st = hilock_check(need());
        if (st == HILOCK_NOT_HELD) {
            told_ = true;
            return false;
        }
        grant_status(st, "check");
        return true;
    }

    /* Renew in the background until unlock (hilock_keepalive without a callback: watch
     * validity(), which drops to 0 when the keepalive gives up; validity() 0 does not tell,
     * check() or guard::lost() do). Throws error (NOT_HELD and LOST tell, as extend()). */
    void keepalive() { grant_status(hilock_keepalive(need(), nullptr, nullptr), "keepalive"); }

    /* Run a command only while this grant holds (hilock_guarded_command, hilock.h: one script
     * compares the grant and runs the command, atomically), e.g. m.guarded({"SET", "job:7",
     * "done"}); binary-safe. Returns its reply, owned. A command the server refused comes back
     * as its error reply (type HILOCK_REPLY_ERROR; EREPLY, not thrown: it is the command's own
     * answer), and so does a reply past the client's limits ("reply too large": it ran).
     * Throws error otherwise: NOT_HELD and LOST (nothing ran; they tell the program of the
     * loss: A LOSS ALREADY REPORTED), EREPLICAS (it ran, but fewer than min_replicas replicas
     * acknowledged it; its reply is dropped), EINVAL (not held; a Redlock or legacy grant; no
     * arguments or more than HILOCK_GUARDED_MAX_ARGS; a command a script may not run; on a
     * Cluster a key outside the lock key's slot) and the client's errors (EIO...). */
    reply guarded(const std::vector<std::string> &args)
    {
        std::vector<const char *> argv;
        std::vector<size_t> len;
        hilock *l = need();
        argv.reserve(args.size());
        len.reserve(args.size());
        for (const std::string &a : args) {
            argv.push_back(a.data());
            len.push_back(a.size());
        }
        int argc = args.size() > HILOCK_GUARDED_MAX_ARGS ? HILOCK_GUARDED_MAX_ARGS + 1 : static_cast<int>(args.size());
        hilock_reply *r = nullptr;
        hilock_status st = hilock_guarded_command(l, argc, argv.data(), len.data(), &r);
        reply owned(r);
        if (st != HILOCK_EREPLY || !owned) grant_status(st, "guarded command");
        return owned;
    }

    bool owns_lock() const noexcept { return l_ != nullptr; }
    explicit operator bool() const noexcept { return owns_lock(); }

    /* The grant's fencing token (hilock_fence); 0 when not held. */
    uint64_t fence() const noexcept { return hilock_fence(l_); }
    /* The value written (hilock_token); "" when not held. */
    std::string token() const { return l_ ? hilock_token(l_) : ""; }
    /* How long the grant is still safely ours (hilock_validity_ms); 0 when not held. */
    std::chrono::milliseconds validity() const noexcept { return std::chrono::milliseconds(hilock_validity_ms(l_)); }

    const std::string &key() const noexcept { return key_; }
    std::chrono::milliseconds ttl() const noexcept { return ttl_; }
    hilock *native_handle() const noexcept { return l_; }   /* owned by this object */

protected:
    /* What a grant is: the lock (hilock_acquire), a permit of limit (hilock_sem_acquire: the
     * semaphore class), or the shared/exclusive lock (hilock_rw_acquire: shared_mutex). */
    enum class kind { lock, permit, rw };
    mutex(client &c, std::string key, std::chrono::milliseconds ttl, kind k, int limit)
        : c_(c.get()), key_(std::move(key)), ttl_(ttl), kind_(k), limit_(limit), mode_(HILOCK_EXCLUSIVE),
          l_(nullptr), told_(false), unlocked_(HILOCK_OK) {}
    /* A wait of d in whole milliseconds, rounded up; <= 0 = one attempt. */
    template <class Rep, class Period>
    static int64_t wait_of(const std::chrono::duration<Rep, Period> &d)
    {
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
        return ms > 0 ? static_cast<int64_t>(ms) : 0;
    }
    /* Take a grant (mode: for the rw kind) waiting up to wait_ms: true if granted, false on BUSY;
     * throws error "<what> KEY: ..." otherwise. */
    bool acquire(int64_t wait_ms, const char *what, hilock_rw_mode mode = HILOCK_EXCLUSIVE)
    {
        if (!c_) throw error(HILOCK_EINVAL, std::string(what) + " " + key_, "no client (moved from)");
        if (l_) throw error(HILOCK_EINVAL, std::string(what) + " " + key_, "already held by this object");
        hilock_status st = take(wait_ms, mode);
        if (st == HILOCK_BUSY) return false;
        check_status(st, what);
        mode_ = mode;
        told_ = false;   /* a new grant: told of nothing yet */
        return true;
    }
    hilock_rw_mode held_mode() const noexcept { return mode_; }
    int limit() const noexcept { return limit_; }

private:
    friend class guard;
    static bool lost(hilock_status st) noexcept { return st == HILOCK_NOT_HELD || st == HILOCK_LOST; }
    hilock_status take(int64_t wait_ms, hilock_rw_mode mode)
    {
        const char *k = key_.c_str();
        switch (kind_) {
        case kind::permit: return hilock_sem_acquire(c_, k, limit_, ttl_.count(), wait_ms, &l_);
        case kind::rw: return hilock_rw_acquire(c_, k, mode, ttl_.count(), wait_ms, &l_);
        default: return hilock_acquire(c_, k, ttl_.count(), wait_ms, &l_);
        }
    }
    /* Release and forget the grant; unlocked_ and errmsg_ say how it went. false: none held. */
    bool give_back() noexcept
    {
        if (!l_) return false;
        unlocked_ = hilock_release(l_);
        try {
            errmsg_ = unlocked_ == HILOCK_OK ? "" : hilock_client_errmsg(c_);
        } catch (...) {   /* no memory for the text: the status still says it */
        }
        hilock_free(l_);
        l_ = nullptr;
        return true;
    }
    hilock *need() const
    {
        if (!l_) throw error(HILOCK_EINVAL, key_, "not held");
        return l_;
    }
    void check_status(hilock_status st, const char *what) const
    {
        if (st != HILOCK_OK) throw error(st, std::string(what) + " " + key_, hilock_client_errmsg(c_), key_);
    }
    /* A call on the held grant: a loss it throws is a loss the program was told of. */
    void grant_status(hilock_status st, const char *what)
    {
        if (lost(st)) told_ = true;
        check_status(st, what);
    }
    hilock_client *c_;
    std::string key_;
    std::chrono::milliseconds ttl_;
    kind kind_;
    int limit_;              /* kind::permit: the limit each grant asks for */
    hilock_rw_mode mode_;    /* kind::rw: the held grant's mode */
    hilock *l_;
    bool told_;   /* the program was told this grant is gone: unlock() calls no handler */
    hilock_status unlocked_;
    std::string errmsg_;   /* the detail behind unlocked_ */
    std::function<void(const lost_error &)> on_lost_;   /* empty: get_lost_handler() */
};

/* Holds a mutex for a scope and says whether the lock held to the end (std::lock_guard's
 * place, for code that wants the answer where the work is):
 *
 *     {
 *         hilock_cpp::guard g(m);                 // m.lock()
 *         write_batch(m.fence());
 *         if (g.release() != HILOCK_OK) undo_batch();   // NOT_HELD / LOST: it was lost
 *     }
 *
 * guard(m, wait) tries for `wait` instead (owns_lock() says whether it got it). lost() asks at
 * any time without a round trip: while held, whether the validity has run out (the grant can
 * no longer be trusted: stop the work); after release(), whether the release found it gone.
 * A guard that ends still holding the lock gives it back with m.unlock(): a loss found then
 * goes to the on_lost handler, unless lost() (or m.check()...) had said so: `if (g.lost())
 * return;` ends quietly (A LOSS ALREADY REPORTED). Neither copyable nor movable; m must
 * outlive it. */
class guard {
public:
    explicit guard(mutex &m) : m_(m), owns_(false), released_(HILOCK_OK)
    {
        m.lock();
        owns_ = true;
    }
    template <class Rep, class Period>
    guard(mutex &m, const std::chrono::duration<Rep, Period> &wait)
        : m_(m), owns_(m.try_lock_for(wait)), released_(HILOCK_OK) {}
    guard(const guard &) = delete;
    guard &operator=(const guard &) = delete;
    ~guard()
    {
        if (owns_) m_.unlock();
    }

    bool owns_lock() const noexcept { return owns_; }
    explicit operator bool() const noexcept { return owns_; }

    /* Give the lock back now; the status says how it went: OK (held to the end), NOT_HELD or
     * LOST (it was lost: lost() is now true), or an error (the outcome is unknown; the key lives
     * until its ttl). No handler is called: the answer is yours. EINVAL if this guard does not
     * hold it (not granted, or released already). */
    [[nodiscard]] hilock_status release() noexcept
    {
        if (!owns_) return HILOCK_EINVAL;
        owns_ = false;
        released_ = m_.give_back() ? m_.unlocked_ : HILOCK_EINVAL;   /* EINVAL: m.unlock() came first */
        return released_;
    }

    /* True once the lock can no longer be trusted: validity() 0 while held, or a release that
     * found it gone. A true while held has told the program (m.unlock() calls no handler). */
    bool lost() const noexcept
    {
        if (!owns_) return mutex::lost(released_);
        if (m_.validity() > std::chrono::milliseconds(0)) return false;
        m_.told_ = true;
        return true;
    }

private:
    mutex &m_;
    bool owns_;
    hilock_status released_;   /* what release() returned */
};

/* A shared/exclusive lock (hilock_rw_acquire: writer-preferring), shaped as
 * std::shared_timed_mutex: lock, try_lock, try_lock_for, try_lock_until and unlock take and give
 * back an exclusive grant; lock_shared, try_lock_shared, try_lock_shared_for,
 * try_lock_shared_until and unlock_shared a shared one. So std::unique_lock, std::scoped_lock and
 * hilock_cpp::guard take it exclusive, std::shared_lock shared.
 *
 *     hilock_cpp::shared_mutex m(c, "config", std::chrono::seconds(30));
 *     {
 *         std::shared_lock<hilock_cpp::shared_mutex> g(m);   // with other readers, no writer
 *         ... read ...
 *     }
 *
 * Everything else is mutex's (THREADS, NOT RE-ENTRANT, errors, A LOST LOCK IS NEVER SILENT):
 * one object is one holder and holds at most one grant, in one mode; give each reader and writer
 * its own object (and each thread its own client), all naming the same key. A second lock*() on
 * an object that holds a grant throws EINVAL "already held by this object", whatever the modes;
 * unlock_shared() and unlock() both give back the grant held, in whichever mode (so do release(),
 * the guards and the destructor). A key that holds another kind (a semaphore, a plain mutex's
 * lock...) throws error with the library's status and message, which names the kind found. */
class shared_mutex final : public mutex {
public:
    /* Nothing is sent until the first lock*. c must outlive this object. */
    shared_mutex(client &c, std::string key, std::chrono::milliseconds ttl)
        : mutex(c, std::move(key), ttl, kind::rw, 0) {}

    /* As lock(), try_lock(), try_lock_for() and try_lock_until(), for a shared grant. */
    void lock_shared() { (void)acquire(HILOCK_WAIT_FOREVER, "lock_shared", HILOCK_SHARED); }
    bool try_lock_shared() { return acquire(0, "try_lock_shared", HILOCK_SHARED); }
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &d)
    {
        return acquire(wait_of(d), "try_lock_shared_for", HILOCK_SHARED);
    }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return try_lock_shared_for(t - Clock::now());
    }
    /* unlock(): never throws; the outcome is in unlock_status(), a loss goes to the handler. */
    void unlock_shared() noexcept { unlock(); }

    /* The held grant's mode: HILOCK_SHARED or HILOCK_EXCLUSIVE (when not held: EXCLUSIVE). */
    hilock_rw_mode mode() const noexcept { return owns_lock() ? held_mode() : HILOCK_EXCLUSIVE; }
};

/* A counting semaphore (hilock_sem_acquire): at most limit() holders of the key at once, each
 * with its own permit (token, expiry, fencing token). One object is one holder and holds at
 * most one permit: acquire, try_acquire, try_acquire_for and try_acquire_until take it,
 * release() gives it back (throwing lost_error when it was found gone, as mutex::release()).
 * It is a mutex over a permit otherwise: lock, try_lock* and unlock are the same calls (so
 * std::unique_lock and hilock_cpp::guard hold a permit for a scope), and extend, check,
 * keepalive, fence, validity and the loss rules are mutex's.
 *
 *     hilock_cpp::semaphore s(c, "jobs:encode", 4, std::chrono::minutes(5));   // 4 at once
 *     std::unique_lock<hilock_cpp::semaphore> g(s);                            // a permit
 *
 * limit is each grant's (the C call's: granted while fewer than limit permits are held): a bad
 * one (< 1 or > HILOCK_SEM_LIMIT_MAX) throws error with HILOCK_EINVAL from the first acquire*
 * (or lock*), as a bad ttl does; nothing is sent. */
class semaphore final : public mutex {
public:
    /* Nothing is sent until the first acquire*. c must outlive this object. */
    semaphore(client &c, std::string key, int limit, std::chrono::milliseconds ttl)
        : mutex(c, std::move(key), ttl, kind::permit, limit) {}

    /* As lock(), try_lock(), try_lock_for() and try_lock_until(): waits, throws on errors
     * (EINVAL if this object holds a permit already), false when all permits stay held. */
    void acquire() { (void)mutex::acquire(HILOCK_WAIT_FOREVER, "acquire"); }
    bool try_acquire() { return mutex::acquire(0, "try_acquire"); }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d)
    {
        return mutex::acquire(wait_of(d), "try_acquire_for");
    }
    template <class Clock, class Duration>
    bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return try_acquire_for(t - Clock::now());
    }

    using mutex::limit;   /* the constructor's */
};

} // namespace hilock_cpp

#endif /* C++17 */
#endif /* HILOCK_HPP */
