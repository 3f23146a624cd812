/* SPDX-License-Identifier: BSD-3-Clause */
'use strict';
// peer.js -- drives the real legacy client npm redis-lock@0.0.9 (SETNX/GETSET, millisecond
// stamps, key "lock.<name>") on node_redis 3.1.2, for tests/test_interop.c.
//
//   node peer.js versions
//   node peer.js contend   PORT NAME DURATION_MS TIMEOUT_MS RETRY_MS
//       acquire, critical section, release, in a loop for DURATION_MS; prints
//       {"acquired":n,"overlaps":k}. The critical section: INCR lock.NAME:inside (must return
//       1, else an overlap), a read-modify-write of lock.NAME:counter with a pause between
//       read and write (lost updates show up as a wrong count), DECR lock.NAME:inside.
//   node peer.js once      PORT NAME TIMEOUT_MS RETRY_MS
//       acquire once (waiting as long as it takes), print {"acquired_at":ms,"value":"..."},
//       release, exit.
//   node peer.js hold      PORT NAME TIMEOUT_MS
//       acquire, print {"acquired_at":ms,"value":"..."}, then exit without releasing: a crash.
//   node peer.js hold-late PORT NAME TIMEOUT_MS SLEEP_MS
//       acquire, print the value, sleep SLEEP_MS, release with redis-lock's own guarded DEL,
//       print {"released_at":ms}, exit.
// Every mode exits with status 2 after 60 s, whatever happens: a test never hangs on it.

const redis = require('redis');
const redisLock = require('redis-lock');

const [mode, port, name, a1, a2, a3] = process.argv.slice(2);
setTimeout(() => { console.log(JSON.stringify({ error: 'peer.js: 60 s limit' })); process.exit(2); }, 60000).unref();

if (mode === 'versions') {
  console.log(JSON.stringify({
    node: process.versions.node,
    redisLock: require('redis-lock/package.json').version,
    redis: require('redis/package.json').version,
  }));
  process.exit(0);
}

const client = redis.createClient({ host: '127.0.0.1', port: Number(port) });
client.on('error', (e) => { console.log(JSON.stringify({ error: String(e) })); process.exit(3); });
const key = 'lock.' + name;

function out(o) { process.stdout.write(JSON.stringify(o) + '\n'); }
function finish(o) { out(o); client.quit(() => process.exit(0)); }

if (mode === 'contend') {
  const end = Date.now() + Number(a1);
  const timeout = Number(a2);
  const lock = redisLock(client, Number(a3));
  let acquired = 0, overlaps = 0;
  const round = () => {
    lock(name, timeout, (done) => {
      client.incr(key + ':inside', (e, inside) => {
        if (e || inside !== 1) overlaps++;
        client.get(key + ':counter', (e2, v) => {
          setTimeout(() => {
            client.set(key + ':counter', String(Number(v || 0) + 1), () => {
              client.decr(key + ':inside', () => {
                acquired++;
                done(() => {
                  if (Date.now() >= end) return finish({ acquired, overlaps });
                  setTimeout(round, 2 + Math.floor(Math.random() * 10));   // let the other side in
                });
              });
            });
          }, 1 + Math.floor(Math.random() * 2));
        });
      });
    });
  };
  round();
} else if (mode === 'once') {
  redisLock(client, Number(a2))(name, Number(a1), (done) => {
    const acquiredAt = Date.now();
    client.get(key, (e, v) => {
      done(() => finish({ acquired_at: acquiredAt, value: v }));
    });
  });
} else if (mode === 'hold') {
  redisLock(client, 20)(name, Number(a1), () => {
    const acquiredAt = Date.now();
    client.get(key, (e, v) => {
      out({ acquired_at: acquiredAt, value: v });
      process.exit(0);   // dies holding the lock: no release, and 0.0.x sets no TTL
    });
  });
} else if (mode === 'hold-late') {
  redisLock(client, 20)(name, Number(a1), (done) => {
    const acquiredAt = Date.now();
    client.get(key, (e, v) => {
      out({ acquired_at: acquiredAt, value: v });
      setTimeout(() => done(() => finish({ released_at: Date.now() })), Number(a2));
    });
  });
} else {
  out({ error: 'unknown mode ' + mode });
  process.exit(2);
}
