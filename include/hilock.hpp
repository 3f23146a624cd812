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
 *     }                                           // released here
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
 * NOT RE-ENTRANT: two mutex objects of one client naming the same key do not stack; while one
 * holds it, the other's lock/try_lock* throw error with HILOCK_EINVAL ("this client already
 * holds KEY (hilock locks are not re-entrant)"), at once, instead of waiting for itself.
 *
 * The namespace is hilock_cpp, not hilock: in C++ the C type `hilock` (the held lock) already
 * owns that name.
 *
 * Errors are exceptions (hilock_cpp::error: the status and the client's errmsg). BUSY is not an
 * error: try_lock* return false. unlock() and the destructors never throw.
 */
#ifndef HILOCK_HPP
#define HILOCK_HPP

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "hilock.h"

namespace hilock_cpp {

/* A failed call: status() is the hilock_status, errmsg() the detail the library gave
 * (which server, why); what() is "<what was done>: <errmsg or strerror(status)>". */
class error : public std::runtime_error {
public:
    error(hilock_status status, const std::string &what, const std::string &errmsg)
        : std::runtime_error(what + ": " + (errmsg.empty() ? hilock_strerror(status) : errmsg)),
          status_(status), errmsg_(errmsg) {}
    hilock_status status() const noexcept { return status_; }
    const std::string &errmsg() const { return errmsg_; }

private:
    hilock_status status_;
    std::string errmsg_;
};

/* Owns one hilock_client. Move-only. */
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
    client(client &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    client &operator=(client &&o) noexcept
    {
        if (this != &o) {
            hilock_client_free(c_);
            c_ = std::exchange(o.c_, nullptr);
        }
        return *this;
    }
    client(const client &) = delete;
    client &operator=(const client &) = delete;
    ~client() { hilock_client_free(c_); }

    hilock_client *get() const noexcept { return c_; }   /* nullptr once moved from */
    std::string errmsg() const { return hilock_client_errmsg(c_); }

private:
    hilock_client *c_;
};

/* One key on one client, taken and given back any number of times; holds at most one grant.
 * ONE THREAD AT A TIME, with its client (see THREADS at the top): to lock from several
 * threads, give each thread its own client and mutex; never share one across threads.
 * Each grant lasts `ttl` (the constructor's) unless extend() or keepalive() prolong it: a
 * holder that outlives the ttl has lost the lock (validity() is 0; unlock() then finds it
 * gone). Move-only; a lock destroyed while held is released (errors ignored). */
class mutex {
public:
    /* Nothing is sent until the first lock/try_lock*. c must outlive this object. */
    mutex(client &c, std::string key, std::chrono::milliseconds ttl)
        : c_(c.get()), key_(std::move(key)), ttl_(ttl), l_(nullptr), unlocked_(HILOCK_OK) {}
    mutex(mutex &&o) noexcept
        : c_(o.c_), key_(std::move(o.key_)), ttl_(o.ttl_), l_(std::exchange(o.l_, nullptr)),
          unlocked_(o.unlocked_), errmsg_(std::move(o.errmsg_)) {}
    /* Releases what this object held, then takes over o's grant. */
    mutex &operator=(mutex &&o) noexcept
    {
        if (this != &o) {
            unlock();
            c_ = o.c_;
            key_ = std::move(o.key_);
            ttl_ = o.ttl_;
            l_ = std::exchange(o.l_, nullptr);
            unlocked_ = o.unlocked_;
            errmsg_ = std::move(o.errmsg_);
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

    /* One attempt: true if granted, false if someone else holds it. Throws on errors. */
    bool try_lock() { return acquire(0, "try_lock"); }

    /* Wait up to d (rounded up to a millisecond; <= 0 = one attempt). */
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
    {
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
        return acquire(ms > 0 ? static_cast<int64_t>(ms) : 0, "try_lock_for");
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
     * which the key lives until its ttl). No-op when not held. release() throws instead. */
    void unlock() noexcept
    {
        if (!l_) return;
        unlocked_ = hilock_release(l_);
        try {
            errmsg_ = unlocked_ == HILOCK_OK ? "" : hilock_client_errmsg(c_);
        } catch (...) {   /* no memory for the text: the status still says it */
        }
        hilock_free(l_);
        l_ = nullptr;
    }

    /* unlock(), but a release that was not clean (anything but OK) throws error. */
    void release()
    {
        unlock();
        if (unlocked_ != HILOCK_OK) throw error(unlocked_, "release " + key_, errmsg_);
    }

    /* The status of the last unlock() (HILOCK_OK before any). */
    hilock_status unlock_status() const noexcept { return unlocked_; }

    /* Prolong the grant to ttl from now (hilock_extend); the constructor's ttl is unchanged
     * for later grants. Throws error (NOT_HELD, LOST, ...; EINVAL when not held). */
    void extend(std::chrono::milliseconds ttl) { check_status(hilock_extend(need(), ttl.count()), "extend"); }

    /* Ask the server(s) whether the grant is still ours: true if so, false if NOT_HELD;
     * throws on LOST and errors. */
    bool check()
    {
        hilock_status st = hilock_check(need());
        if (st == HILOCK_NOT_HELD) return false;
        check_status(st, "check");
        return true;
    }

    /* Renew in the background until unlock (hilock_keepalive without a callback: watch
     * validity(), which drops to 0 when the keepalive gives up). Throws error. */
    void keepalive() { check_status(hilock_keepalive(need(), nullptr, nullptr), "keepalive"); }

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

private:
    bool acquire(int64_t wait_ms, const char *what)
    {
        if (!c_) throw error(HILOCK_EINVAL, std::string(what) + " " + key_, "no client (moved from)");
        if (l_) throw error(HILOCK_EINVAL, std::string(what) + " " + key_, "already held by this object");
        hilock_status st = hilock_acquire(c_, key_.c_str(), ttl_.count(), wait_ms, &l_);
        if (st == HILOCK_BUSY) return false;
        check_status(st, what);
        return true;
    }
    hilock *need() const
    {
        if (!l_) throw error(HILOCK_EINVAL, key_, "not held");
        return l_;
    }
    void check_status(hilock_status st, const char *what) const
    {
        if (st != HILOCK_OK) throw error(st, std::string(what) + " " + key_, hilock_client_errmsg(c_));
    }
    hilock_client *c_;
    std::string key_;
    std::chrono::milliseconds ttl_;
    hilock *l_;
    hilock_status unlocked_;
    std::string errmsg_;   /* the detail behind unlocked_ */
};

} // namespace hilock_cpp

#endif /* HILOCK_HPP */
