// tests/mcp/http_upstream.mjs -- Streamable HTTP upstreams for test_http_upstream.mjs, on
// 127.0.0.1 only (a free port, printed as "PORT n" on stdout):
//   /mcp        the official everything server (@modelcontextprotocol/server-everything's
//               createServer) behind the SDK's StreamableHTTPServerTransport, one session per
//               client, answers as SSE streams (as its own streamableHttp entry point does)
//   /mcp-json   the same, answering with JSON bodies (enableJsonResponse)
//   /mcp-400    the same, but an unknown session gets 400 "No valid session ID provided", as
//               the everything server's own streamableHttp entry point answers (not the
//               spec's 404); POST /forget drops every session of these three
//   /hostile    a hand-written MCP server that misbehaves per tool: an endless SSE body, no
//               answer at all, a huge header, a flood, a redirect, an expired session, a
//               request to its client, a changed tool list, a stream closed before its answer
//               (to be resumed by a GET with Last-Event-ID); GET /stats tells what it saw
// With --tls CERT KEY it serves HTTPS with that certificate instead.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';

import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createServer as createEverything } from '@modelcontextprotocol/server-everything/dist/server/index.js';

// ---- the everything server, one session per client ----------------------------------------
const sessions = new Map();
async function everything(req, res, body, json, badRequest) {
  const id = req.headers['mcp-session-id'];
  if (id && sessions.has(id)) return sessions.get(id).handleRequest(req, res, body);
  if (id && badRequest) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: body?.id }));
    return;
  }
  if (id) { // an unknown session: 404, as the spec says, so the client starts a new one
    res.writeHead(404).end();
    return;
  }
  const { server, cleanup } = createEverything();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    enableJsonResponse: json,
    onsessioninitialized: (sid) => sessions.set(sid, transport),
    onsessionclosed: (sid) => { sessions.delete(sid); cleanup(sid); },
  });
  await server.connect(transport);
  return transport.handleRequest(req, res, body);
}

// ---- the hostile server ---------------------------------------------------------------------
const stats = { inits: 0, sessions: [], deleted: [], cancelled: [], auth: [], versions: [], declined: null, resumes: [] };
const polling = new Map(); // event id -> { id: the request's, closed: when its stream was closed }
let session = null;
let expiredOnce = false;
let extraTool = false;
const waiting = new Map(); // our requests to the client: id -> resolve

const tool = (name) => ({ name, description: `hostile ${name}`, inputSchema: { type: 'object' } });
const result = (id, text) => ({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } });

function sse(res) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
}

function hostileCall(msg, res) {
  const id = msg.id;
  switch (msg.params.name) {
    case 'echo': { // a priming event, a comment, a notification, CRLF line ends, data in two lines
      sse(res);
      res.write('id: e1\ndata:\n\n: keep-alive\n\n');
      res.write('event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/message",\r\n' +
        'data: "params":{"level":"info","data":"hi"}}\r\n\r\n');
      const text = JSON.stringify(result(id, `echo ${msg.params.arguments?.text ?? ''}`));
      res.end(`data: ${text.slice(0, 10)}\ndata: ${text.slice(10)}\n\n`);
      return;
    }
    case 'endless': { // notifications without end: stopped by the byte cap
      sse(res);
      const line = `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(1000) } })}\n\n`;
      const pump = () => { while (!res.destroyed && res.write(line)); if (!res.destroyed) res.once('drain', pump); };
      pump();
      return;
    }
    case 'trickle': { // a keep-alive comment now and then, never an answer: stopped by the timeout
      sse(res);
      const t = setInterval(() => res.write(': still here\n\n'), 100);
      res.on('close', () => clearInterval(t));
      return;
    }
    case 'silent': // no answer at all, not even headers
      return;
    case 'bigheader': // one header line of 1 MiB
      res.writeHead(200, { 'content-type': 'application/json', 'x-big': 'a'.repeat(1 << 20) });
      res.end(JSON.stringify(result(id, 'unreachable')));
      return;
    case 'manyheaders': { // 2000 header lines of 100 bytes: 200 KB in all
      const headers = { 'content-type': 'application/json' };
      for (let i = 0; i < 2000; i++) headers[`x-h${i}`] = 'b'.repeat(100);
      res.writeHead(200, headers);
      res.end(JSON.stringify(result(id, 'unreachable')));
      return;
    }
    case 'poll': // 2025-11-25's polling: a priming event with an id and retry:, then the
      // connection closes before the answer; the answer comes to the GET that resumes
      sse(res);
      polling.set(`poll-${id}`, { id, closed: Date.now(), forever: false });
      res.end(`id: poll-${id}\nretry: 300\ndata:\n\n`);
      return;
    case 'pollforever': // every resume closes again with a new id: the client gives up
      sse(res);
      polling.set(`pf-${id}-0`, { id, closed: Date.now(), forever: true, n: 0 });
      res.end(`id: pf-${id}-0\nretry: 0\ndata:\n\n`);
      return;
    case 'redirect': // elsewhere on this server: a client that follows would carry its token along
      res.writeHead(307, { location: '/mcp' }).end();
      return;
    case 'flood': // a JSON body of 10 MB
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(result(id, 'f'.repeat(10 << 20))));
      return;
    case 'expire': // the first call finds its session gone: the client starts a new one
      if (!expiredOnce) {
        expiredOnce = true;
        session = `gone-${randomUUID()}`;
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(result(id, 'after expiry')));
      return;
    case 'sampling': { // asks its client for sampling on the stream, answers what it got
      sse(res);
      const rid = `s-${randomUUID()}`;
      waiting.set(rid, (reply) => {
        stats.declined = reply.error?.message ?? null;
        res.end(`data: ${JSON.stringify(result(id, `declined: ${stats.declined}`))}\n\n`);
      });
      res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: rid, method: 'sampling/createMessage', params: { messages: [], maxTokens: 1 } })}\n\n`);
      return;
    }
    case 'relist': // its tool list changes: told on the stream before the answer
      extraTool = true;
      sse(res);
      res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' })}\n\n`);
      res.end(`data: ${JSON.stringify(result(id, 'changed'))}\n\n`);
      return;
    default:
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(result(id, `called ${msg.params.name}`)));
  }
}

function hostile(req, res, msg) {
  if (req.method === 'DELETE') {
    stats.deleted.push(req.headers['mcp-session-id'] ?? null);
    res.writeHead(200).end();
    return;
  }
  stats.auth.push(req.headers.authorization ?? null);
  if (msg.method === 'initialize') {
    stats.inits++;
    session = randomUUID();
    stats.sessions.push(session);
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': session });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: {
      protocolVersion: msg.params.protocolVersion, capabilities: { tools: { listChanged: true } },
      serverInfo: { name: 'hostile', version: '1.0.0' } } }));
    return;
  }
  if (req.headers['mcp-session-id'] !== session) {
    res.writeHead(404).end();
    return;
  }
  stats.versions.push(req.headers['mcp-protocol-version'] ?? null);
  if (req.method === 'GET') { // a stream resumed from its Last-Event-ID
    const last = req.headers['last-event-id'];
    const p = polling.get(last);
    stats.resumes.push({ last, after: p ? Date.now() - p.closed : null });
    if (!p) return res.writeHead(405).end();
    polling.delete(last);
    sse(res);
    if (p.forever) {
      const next = `pf-${p.id}-${p.n + 1}`;
      polling.set(next, { ...p, n: p.n + 1, closed: Date.now() });
      res.end(`id: ${next}\nretry: 0\ndata:\n\n`);
      return;
    }
    res.end(`id: ${last}-answer\ndata: ${JSON.stringify(result(p.id, 'after reconnect'))}\n\n`);
    return;
  }
  if (msg.method === undefined) { // a response to one of our requests
    waiting.get(msg.id)?.(msg);
    waiting.delete(msg.id);
    res.writeHead(202).end();
    return;
  }
  if (msg.id === undefined) { // a notification
    if (msg.method === 'notifications/cancelled')
      stats.cancelled.push({ id: msg.params.requestId, reason: msg.params.reason });
    res.writeHead(202).end();
    return;
  }
  if (msg.method === 'tools/list') {
    const names = ['echo', 'endless', 'trickle', 'silent', 'bigheader', 'manyheaders', 'flood',
      'redirect', 'expire', 'sampling', 'relist', 'poll', 'pollforever', ...(extraTool ? ['added'] : [])];
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { tools: names.map(tool) } }));
    return;
  }
  if (msg.method === 'tools/call') return hostileCall(msg, res);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no such method' } }));
}

const tls = process.argv.indexOf('--tls');
const serve = (req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    const body = text ? JSON.parse(text) : undefined;
    const path = req.url.split('?')[0];
    if (path === '/stats') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
    if (path === '/mcp' || path === '/mcp-json' || path === '/mcp-400')
      return everything(req, res, body, path === '/mcp-json', path === '/mcp-400');
    if (path === '/forget') {
      sessions.clear();
      return res.writeHead(200).end();
    }
    if (path === '/hostile') return hostile(req, res, body ?? {});
    res.writeHead(404).end();
  });
};
const http = tls < 0 ? createHttpServer(serve)
  : createHttpsServer({ cert: readFileSync(process.argv[tls + 1]), key: readFileSync(process.argv[tls + 2]) }, serve);
http.listen(0, '127.0.0.1', () => console.log(`PORT ${http.address().port}`));
