/* SPDX-License-Identifier: BSD-3-Clause */
'use strict';
// node_worker.js -- the real legacy client, npm redis-lock 0.0.9 on node_redis 3.1.2, as one
// torture worker: it contends on the same keys as the hilock workers (it locks
// "lock.<name>" with millisecond stamps, the "node-redis-lock" codec) and logs its beliefs
// in the harness's format, so the checker judges it like any other holder.
//
//   node node_worker.js MODULES_DIR RUN_DIR SLOT GEN PORT TIMEOUT_MS SEED NAME...
//
// The library believes it holds the lock until its stamp passes (it DELs only while
// `stamp > Date.now()`), so the window logged is [callback, stamp], converted from the wall
// clock to CLOCK_MONOTONIC (process.hrtime, as libuv reads it) with sub-millisecond wall time.
// It mints no fencing token (fence 0 in the log) and makes no guarded writes.
// SIGTERM: finish the current holding, exit 0.
const path = require('path');
const fs = require('fs');
const { performance } = require('perf_hooks');

const [mods, dir, slot, gen, port, timeoutArg, seedArg, ...names] = process.argv.slice(2);
const redis = require(path.join(mods, 'redis'));
const redisLock = require(path.join(mods, 'redis-lock'));
const timeout = Number(timeoutArg);

const fd = fs.openSync(path.join(dir, `w${String(slot).padStart(2, '0')}-${String(gen).padStart(3, '0')}.log`), 'w');
const statePath = path.join(dir, `node-${slot}.state`);
const mono = () => Number(process.hrtime.bigint() / 1000n);   // us, CLOCK_MONOTONIC
const wallMs = () => performance.timeOrigin + performance.now();
const log = (line) => fs.writeSync(fd, line + '\n');
const state = (s) => fs.writeFileSync(statePath, s);

let seed = BigInt(seedArg) & 0xffffffffn;
const rand = () => { seed = (seed * 1103515245n + 12345n) & 0x7fffffffn; return Number(seed) / 0x80000000; };

log(`H ${slot} ${gen} ${process.pid} node`);
const client = redis.createClient({ host: '127.0.0.1', port: Number(port), retry_strategy: () => 20 });
client.on('error', () => {});   // node_redis reconnects by itself (restarts are injected faults)

// The library does not hand the stamp to the task: note what it writes. One acquisition is in
// flight at a time, so the last SETNX/GETSET value is the stamp of the lock just granted.
// A GETSET that returns something other than the value the library judged expired (its
// last GET) lost a race and has overwritten the winner's value with its stamp -- the
// recipe's one destructive write, which no other client can prevent. Logged as
//   G key t_sent t_reply written returned judged
// so the checker can tell the damage it does from a fault of hilock (see also D below).
let lastStamp = 0, lastGet = null;
const setnx = client.setnx.bind(client);
const getset = client.getset.bind(client);
const get = client.get.bind(client);
const keyIndex = (k) => names.indexOf(String(k).slice(5));
client.setnx = (k, v, cb) => { lastStamp = Number(v); return setnx(k, v, cb); };
// Its release is a plain DEL, checked against its stamp when issued, not when executed: a
// DEL that deleted a key and whose answer came after the stamp had passed may have deleted
// the next owner's lock (e.g. queued in node_redis' offline queue while the server was
// down). Logged as  D key t_sent t_reply  for the checker, like a lost GETSET.
const del = client.del.bind(client);
client.del = (k, cb) => {
  const sent = mono(), stamp = lastStamp;
  return del(k, (e, n) => {
    if (!e && n === 1 && wallMs() >= stamp) log(`D ${keyIndex(k)} ${sent} ${mono()}`);
    if (cb) cb(e, n);
  });
};
client.get = (k, cb) => get(k, (e, v) => { lastGet = v; cb(e, v); });
client.getset = (k, v, cb) => {
  const sent = mono(), judged = lastGet;
  lastStamp = Number(v);
  return getset(k, v, (e, old) => {
    // (old === v: another client wrote the very same stamp in the same millisecond: no harm)
    if (!e && old !== judged && old !== String(v)) log(`G ${keyIndex(k)} ${sent} ${mono()} ${v} ${old} ${judged}`);
    cb(e, old);
  });
};

const lock = redisLock(client, 20);
let stopping = false, holding = false;
process.on('SIGTERM', () => {
  stopping = true;
  if (!holding) process.exit(0);
  setTimeout(() => process.exit(0), 3000).unref();
});

function round() {
  if (stopping) process.exit(0);
  const k = Math.floor(rand() * names.length);
  const t0 = mono();
  lock(names[k], timeout, (done) => {
    const t1 = mono();
    const deadline = t1 + Math.floor((lastStamp - wallMs()) * 1000);
    holding = true;
    log(`A ${k} 0 ${t0} ${t1} ${deadline} ${timeout} -1`);
    state(`1 ${k} ${deadline}`);
    const left = Math.max(0, (deadline - mono()) / 1000);
    const hold = rand() < 0.85 ? rand() * 5 : rand() * 0.7 * left;
    setTimeout(() => {
      log(`R ${k} 0 ${mono()}`);   // belief ends; the library DELs only if its stamp has not passed
      state('0');
      done(() => {
        holding = false;
        setTimeout(round, Math.floor(rand() * 10));
      });
    }, hold);
  });
}
state('0');
client.once('ready', round);
