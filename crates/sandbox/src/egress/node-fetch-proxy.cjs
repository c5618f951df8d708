// Preloaded by Corral (NODE_OPTIONS=--require=...) into a Node.js CLI whose sandbox can reach the
// network only through Corral's egress proxy. Node's built-in fetch ignores HTTP(S)_PROXY before
// Node 24, so this gives fetch's global dispatcher a connector that opens every connection as an
// HTTP CONNECT tunnel through the proxy named in CORRAL_EGRESS_PROXY (host:port), then TLS inside
// the tunnel for https:// targets. Nothing else in the program changes.
'use strict';
(function corralEgressPreload() {
  const proxy = process.env.CORRAL_EGRESS_PROXY;
  if (!proxy || typeof globalThis.fetch !== 'function') return;
  const colon = proxy.lastIndexOf(':');
  const proxyHost = proxy.slice(0, colon);
  const proxyPort = Number(proxy.slice(colon + 1));
  const net = require('node:net');
  const tls = require('node:tls');

  // fetch creates its default dispatcher (undici's Agent) on first use; a data: URL makes it
  // do so without any network, so its class can be reused with our connector.
  const slot = Symbol.for('undici.globalDispatcher.1');
  if (globalThis[slot] === undefined) globalThis.fetch('data:,').catch(() => {});
  const Agent = globalThis[slot] && globalThis[slot].constructor;
  if (typeof Agent !== 'function') return;

  function tunnel(opts, callback) {
    let settled = false;
    const settle = (err, socket) => {
      if (settled) return;
      settled = true;
      callback(err, socket);
    };
    const secure = opts.protocol === 'https:';
    const host = String(opts.hostname).replace(/^\[|\]$/g, '');
    const port = Number(opts.port) || (secure ? 443 : 80);
    const authority = net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
    const raw = net.connect({ host: proxyHost, port: proxyPort });
    const fail = (err) => {
      raw.destroy();
      settle(err, null);
    };
    raw.once('error', fail);
    raw.once('connect', () => {
      raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    });
    let head = Buffer.alloc(0);
    const onReadable = () => {
      let chunk;
      while ((chunk = raw.read()) !== null) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > 65536) fail(new Error('corral egress proxy: reply head too long'));
          continue;
        }
        raw.removeListener('readable', onReadable);
        const rest = head.subarray(end + 4);
        const status = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
        if (!/^HTTP\/1\.[01] 200/.test(status)) {
          fail(new Error(`${status}: ${rest.toString('utf8').trim()}`));
          return;
        }
        if (rest.length > 0) raw.unshift(rest);
        raw.removeListener('error', fail);
        if (!secure) {
          settle(null, raw);
          return;
        }
        const tlsSocket = tls.connect({
          socket: raw,
          servername: opts.servername || (net.isIP(host) ? undefined : host),
          ALPNProtocols: ['http/1.1'],
        });
        tlsSocket.once('error', (err) => settle(err, null));
        tlsSocket.once('secureConnect', () => settle(null, tlsSocket));
        return;
      }
    };
    raw.on('readable', onReadable);
  }

  globalThis[slot] = new Agent({ connect: tunnel });
})();
