# SPDX-License-Identifier: BSD-3-Clause
"""peer.py -- drives redis-py's own cluster lock (RedisCluster(...).lock(...), Debian's
python3-redis 4.3.4) for tests/test_interop_cluster.c.

  python3 peer.py versions
      print {"redis":"4.3.4","python":"3.11.2"}; exit 3 if redis-py or RedisCluster is missing
  python3 peer.py serve HOST PORT
      one RedisCluster client on the cluster of HOST:PORT, then one command a line on stdin,
      one JSON line on stdout for each (KEY is the key's bytes in hex: braces, unicode):
        slot KEY                  {"slot":n}               redis-py's own key_slot
        acquire KEY TTL_MS        {"acquired":1,"token":"..."} or {"acquired":0}
                                  lock(KEY, timeout=TTL_MS/1000).acquire(blocking=False)
        release KEY               {"released":1} or {"released":0,"error":"..."}
        quit                      exit 0
Every mode exits with status 2 after 60 s, whatever happens: a test never hangs on it.
"""
import json
import logging
import os
import signal
import sys


def out(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def versions():
    try:
        import redis
        from redis.cluster import RedisCluster  # noqa: F401 (4.1+)
    except ImportError as e:
        out({"error": "redis-py with RedisCluster is missing: %s" % e})
        sys.exit(3)
    out({"redis": redis.__version__, "python": "%d.%d.%d" % sys.version_info[:3]})


def serve(host, port):
    # redis-py's cluster client logs a traceback for every error answer before it handles it
    # (the NOSCRIPT of a script's first EVALSHA, which it answers with SCRIPT LOAD): noise here
    logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)
    from redis.cluster import RedisCluster
    from redis.exceptions import LockError
    rc = RedisCluster(host=host, port=int(port), socket_timeout=5)
    locks = {}
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        cmd, key = words[0], bytes.fromhex(words[1]) if len(words) > 1 else b""
        if cmd == "quit":
            break
        if cmd == "slot":
            out({"slot": rc.keyslot(key)})
        elif cmd == "acquire":
            # thread_local=False: the token stays on the Lock object, not on this thread
            lock = rc.lock(key, timeout=int(words[2]) / 1000.0, thread_local=False)
            if lock.acquire(blocking=False):
                locks[key] = lock
                out({"acquired": 1, "token": lock.local.token.decode()})
            else:
                out({"acquired": 0})
        elif cmd == "release":
            try:
                locks.pop(key).release()
                out({"released": 1})
            except (KeyError, LockError) as e:
                out({"released": 0, "error": "%s: %s" % (type(e).__name__, e)})
        else:
            out({"error": "unknown command " + cmd})
    rc.close()


signal.signal(signal.SIGALRM, lambda *_: (out({"error": "peer.py: 60 s limit"}), os._exit(2)))
signal.alarm(60)
if sys.argv[1:2] == ["versions"]:
    versions()
elif sys.argv[1:2] == ["serve"] and len(sys.argv) == 4:
    serve(sys.argv[2], sys.argv[3])
else:
    out({"error": "usage: peer.py versions | serve HOST PORT"})
    sys.exit(1)
