// Preloaded into MCP test peers (`node --require ./loopback_preload.cjs ...`).
//
// 1. Pins every listening TCP server of the process to 127.0.0.1, whatever host (or none) the
//    server asked for, so a test peer is never reachable from outside this machine.
// 2. Writes the bound port to the file named by LOOPBACK_PORT_FILE once listening (PORT=0 works).
// 3. Counts the requests that open an MCP session (a streamable-HTTP POST without `mcp-session-id`,
//    or a legacy `GET /sse`), remembers the last `x-test-token` header, and answers
//    `GET /__peer_stats` with those numbers before the app sees the request.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const originalListen = net.Server.prototype.listen;

function isPort(value) {
  return typeof value === "number" || (typeof value === "string" && /^\d+$/.test(value));
}

net.Server.prototype.listen = function listen(...args) {
  if (args.length === 0 || typeof args[0] === "function") {
    args = [0, LOOPBACK, ...args];
  } else if (isPort(args[0])) {
    const rest = args.slice(1);
    if (typeof rest[0] === "string" || rest[0] === undefined || rest[0] === null) rest.shift();
    args = [Number(args[0]), LOOPBACK, ...rest];
  } else if (typeof args[0] === "object" && args[0] !== null && args[0].path === undefined) {
    args = [{ ...args[0], host: LOOPBACK }, ...args.slice(1)];
  }
  const portFile = process.env.LOOPBACK_PORT_FILE;
  if (portFile) {
    this.once("listening", () => {
      const address = this.address();
      if (address && typeof address === "object") fs.writeFileSync(portFile, String(address.port));
    });
  }
  return originalListen.apply(this, args);
};

const stats = { sessions_opened: 0, requests: 0, last_test_token: null };
const originalEmit = http.Server.prototype.emit;
http.Server.prototype.emit = function emit(event, ...args) {
  if (event === "request") {
    const [request, response] = args;
    if (request.method === "GET" && request.url === "/__peer_stats") {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(stats));
      return true;
    }
    stats.requests += 1;
    const opensSession =
      (request.method === "POST" && !request.headers["mcp-session-id"] && !request.url.includes("sessionId=")) ||
      (request.method === "GET" && request.url.split("?")[0] === "/sse");
    if (opensSession) stats.sessions_opened += 1;
    if (request.headers["x-test-token"]) stats.last_test_token = request.headers["x-test-token"];
  }
  return originalEmit.call(this, event, ...args);
};
