#!/usr/bin/node
// delay-server.js -- the reference row for /delay/{ms}: Node.js answering after setTimeout, the
// idiom HttpArena names for an async runtime. Plain node, no npm packages.
//
//   node harness/peers/delay-server.js --port 8080
//   curl -v localhost:8080/delay/100       # 200 text/plain "100", after 100 ms
//
// Routes (the project's spec, for the two a peer is priced on): GET /delay/{ms} waits ms
// (digits only, 0..60000; else 400) with setTimeout and answers the parsed integer; GET
// /plaintext answers "Hello, World!" at once (its CPU ceiling); anything else is 404.
// --port 0 picks a free port; --port-file FILE writes it once listening. SIGTERM/SIGINT stop it.
'use strict';
const http = require('http');
const fs = require('fs');

let port = 8080;
let portFile = null;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--port') port = Number(args[++i]);
  else if (args[i] === '--port-file') portFile = args[++i];
  else {
    console.error(`delay-server.js: unknown argument ${args[i]}`);
    process.exit(2);
  }
}

function reply(res, status, body) {
  res.writeHead(status, {
    'Content-Type': 'text/plain',
    'Content-Length': Buffer.byteLength(body),
    'Server': 'node-delay-server',
  });
  res.end(body);
}

const server = http.createServer((req, res) => {
  const url = req.url;
  if (url.startsWith('/delay/')) {
    if (req.method !== 'GET') return reply(res, 405, 'method not allowed\n');
    const text = url.slice(7);
    if (!/^[0-9]{1,5}$/.test(text) || Number(text) > 60000) {
      return reply(res, 400, 'delay must be 0..60000 ms, digits only\n');
    }
    const ms = Number(text);  // per-request state: this closure, nothing shared
    if (ms === 0) return reply(res, 200, '0');
    // Node's timers count whole milliseconds from a cached loop time, so one may fire up to
    // 1 ms before `ms` have really passed since this request arrived; wait out the rest then.
    const due = process.hrtime.bigint() + BigInt(ms) * 1000000n;
    const fire = () => {
      const left = due - process.hrtime.bigint();
      if (left > 0n) return setTimeout(fire, Math.ceil(Number(left) / 1e6));
      reply(res, 200, String(ms));
    };
    setTimeout(fire, ms);
    return;
  }
  if (url === '/plaintext') return reply(res, 200, 'Hello, World!');
  reply(res, 404, 'not found\n');
});
// Connections are held for the whole run, as cm-load holds them.
server.keepAliveTimeout = 300000;
server.headersTimeout = 310000;
server.requestTimeout = 0;
server.maxRequestsPerSocket = 0;

server.listen(port, '127.0.0.1', () => {
  const bound = server.address().port;
  console.log(`delay-server.js listening on http://127.0.0.1:${bound}/ (pid ${process.pid})`);
  if (portFile) fs.writeFileSync(portFile, `${bound}\n`);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}
