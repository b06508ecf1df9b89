// node_probe.js — node's http and net modules on the loopback; print what a program sees.
//
//   node node_probe.js server PORTFILE     an http server and a net echo server; writes
//                                          the two ports, one a line, to PORTFILE once both listen
//   node node_probe.js client HTTP_PORT NET_PORT
//
// The client's stdout lines are observations (digests, statuses, endings, what the server saw),
// never times, so the runs over kernel TCP and under the switch must print the same lines
// (tests/e2e/t_app_node.sh compares them). Times go to stderr. The first line is "# pid N".
'use strict';
const http = require('http');
const net = require('net');
const fs = require('fs');
const crypto = require('crypto');

// body(n, seed): n deterministic bytes (xorshift32), the same in server and client.
function body(n, seed) {
	const words = new Uint32Array(Math.ceil(n / 4));
	let x = (seed * 2654435761 + n) >>> 0 || 1;
	for (let i = 0; i < words.length; i++) {
		x ^= x << 13; x >>>= 0;
		x ^= x >>> 17;
		x ^= x << 5; x >>>= 0;
		words[i] = x;
	}
	return Buffer.from(words.buffer, 0, n);
}
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex').slice(0, 16);

function server(portfile) {
	const seen = []; // what the server observed of each connection's end, in order
	const hs = http.createServer((req, res) => {
		const u = new URL(req.url, 'http://x');
		const n = Number(u.searchParams.get('n') || 0);
		if (u.pathname === '/bytes') {
			res.setHeader('Content-Length', n);
			res.end(body(n, 1));
		} else if (u.pathname === '/chunked') {
			// no Content-Length: chunked transfer encoding, pieces of several sizes
			const b = body(n, 2);
			let off = 0, k = 0;
			const step = () => {
				while (off < b.length) {
					const len = [1, 7, 4096, 65536, 300000][k++ % 5];
					const ok = res.write(b.subarray(off, off + len));
					off += len;
					if (!ok) return res.once('drain', step);
				}
				res.end();
			};
			step();
		} else if (u.pathname === '/upload') {
			const h = crypto.createHash('sha256');
			let len = 0;
			req.on('data', (d) => { h.update(d); len += d.length; });
			req.on('end', () => res.end(JSON.stringify({ len, sha: h.digest('hex').slice(0, 16),
				chunked: req.headers['transfer-encoding'] || 'no' })));
		} else if (u.pathname === '/abort') {
			// 50 MB the client stops reading after a few: how does this response end here?
			const b = body(50e6, 3);
			let done = false;
			res.on('finish', () => { done = true; });
			res.on('close', () => seen.push('abort: response closed, finished=' + done));
			res.setHeader('Content-Length', b.length);
			res.end(b);
		} else if (u.pathname === '/seen') {
			res.end(JSON.stringify(seen));
		} else {
			res.statusCode = 404;
			res.end('no');
		}
	});
	hs.keepAliveTimeout = 30000;
	const ns = net.createServer((s) => {
		// a net echo; a first line "END N" or "DESTROY N" asks the server to read N bytes, then
		// write them back and end() (or destroy()) the socket
		let head = Buffer.alloc(0), mode = null, want = 0, got = 0;
		const h = crypto.createHash('sha256');
		const kept = [];
		s.on('data', (d) => {
			if (mode === null) {
				head = Buffer.concat([head, d]);
				const nl = head.indexOf(10);
				if (nl < 0) return;
				const words = head.subarray(0, nl).toString().split(' ');
				mode = words[0];
				want = Number(words[1] || 0);
				d = head.subarray(nl + 1);
			}
			got += d.length;
			h.update(d);
			if (mode === 'ECHO') return void s.write(d);
			kept.push(d);
			if (got === want) {
				s.write(Buffer.concat(kept));
				if (mode === 'DESTROY') s.destroy();
				else s.end();
			}
		});
		s.on('end', () => {
			seen.push('net ' + mode + ': end after ' + got + ' bytes ' + h.digest('hex').slice(0, 12));
			if (mode === 'ECHO') s.end();
		});
		s.on('error', (e) => seen.push('net ' + mode + ': error ' + e.code));
		s.on('close', () => { if (mode === 'DESTROY') seen.push('net DESTROY: destroyed after ' + got); });
	});
	hs.listen(0, '127.0.0.1', () => ns.listen(0, '127.0.0.1', () => {
		fs.writeFileSync(portfile + '.tmp', hs.address().port + '\n' + ns.address().port + '\n');
		fs.renameSync(portfile + '.tmp', portfile);
	}));
	process.on('SIGTERM', () => { hs.close(); ns.close(); process.exit(0); });
}

function get(agent, port, path) {
	return new Promise((resolve, reject) => {
		const req = http.get({ agent, port, host: '127.0.0.1', path }, (res) => {
			const h = crypto.createHash('sha256');
			let len = 0;
			res.on('data', (d) => { h.update(d); len += d.length; });
			res.on('end', () => resolve({ status: res.statusCode, len, sha: h.digest('hex').slice(0, 16),
				te: res.headers['transfer-encoding'] || 'no' }));
			res.on('error', reject);
		});
		req.on('error', reject);
	});
}

function upload(agent, port, n, piece) {
	return new Promise((resolve, reject) => {
		const req = http.request({ agent, port, host: '127.0.0.1', path: '/upload', method: 'POST' }, (res) => {
			let s = '';
			res.on('data', (d) => { s += d; });
			res.on('end', () => resolve(s));
		});
		req.on('error', reject);
		const b = body(n, 4);
		let off = 0;
		const step = () => {
			while (off < b.length) {
				const ok = req.write(b.subarray(off, off + piece));
				off += piece;
				if (!ok) return req.once('drain', step);
			}
			req.end();
		};
		step();
	});
}

// net_case(port, prefix, data, how): send prefix+data on a net connection, read what comes back
// until the connection ends, and say how it ended. how: 'end' (client ends after its write),
// 'destroy' (client destroys once it has 64 KiB of the echo back: data unread, an RST over TCP).
function net_case(port, prefix, data, how) {
	return new Promise((resolve) => {
		const s = net.connect(port, '127.0.0.1');
		const h = crypto.createHash('sha256');
		let got = 0, ended = false, err = 'none';
		s.on('connect', () => {
			s.write(Buffer.concat([Buffer.from(prefix), data]));
			if (how === 'end') s.end();
		});
		s.on('data', (d) => {
			h.update(d);
			got += d.length;
			if (how === 'destroy' && got >= 65536) s.destroy();
		});
		s.on('end', () => { ended = true; });
		s.on('error', (e) => { err = e.code; });
		s.on('close', (hadError) => resolve(how === 'destroy' ? 'destroyed by the client' :
			`read ${got} ${h.digest('hex').slice(0, 12)} end=${ended} error=${err} hadError=${hadError}`));
	});
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function client(hport, nport, steps) {
	const t0 = Date.now();
	const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
	if (steps.includes('get')) {
	const sizes = [1, 100, 1460, 16384, 65536, 262144, 1 << 20, 3e6, 8e6, 20e6];
	// 20 requests at once on the keep-alive agent, then 20 more on the same sockets
	for (const round of [1, 2]) {
		const jobs = [];
		for (let i = 0; i < 20; i++) {
			const n = sizes[i % sizes.length];
			jobs.push(get(agent, hport, (i % 2 ? '/chunked?n=' : '/bytes?n=') + n).then((r) =>
				`${i % 2 ? 'chunked' : 'bytes'} ${n}: ${r.status} ${r.len} ${r.sha} te=${r.te} ` +
				`want ${sha(body(n, i % 2 ? 2 : 1))}`));
		}
		for (const line of await Promise.all(jobs)) console.log(`get round ${round} ${line}`);
	}
	console.error(`  get: ${Date.now() - t0} ms`);
	}
	if (steps.includes('upload')) {
	const ups = [];
	for (const [n, piece] of [[0, 1], [1, 1], [5000, 7], [1 << 20, 65536], [20e6, 1000000], [20e6, 16384]])
		ups.push(upload(agent, hport, n, piece).then((r) => `upload ${n} in ${piece}: ${r} want ${sha(body(n, 4))}`));
	for (const line of await Promise.all(ups)) console.log(line);
	console.error(`  upload: ${Date.now() - t0} ms`);
	}
	if (steps.includes('abort')) {
	// the client aborts mid-response
	await new Promise((resolve) => {
		const req = http.get({ port: hport, host: '127.0.0.1', path: '/abort' }, (res) => {
			let got = 0;
			res.on('data', (d) => {
				got += d.length;
				if (got >= 1 << 20) req.destroy();
			});
		});
		req.on('error', () => {});
		req.on('close', () => { console.log('abort: the client destroyed its request'); resolve(); });
	});
	console.error(`  abort: ${Date.now() - t0} ms`);
	}
	if (steps.includes('net')) {
	console.log('net end: ' + await net_case(nport, 'ECHO\n', body(5e6, 5), 'end') + ` want ${sha(body(5e6, 5)).slice(0, 12)}`);
	console.log('net server end(): ' + await net_case(nport, 'END 300000\n', body(300000, 6), 'none') +
		` want ${sha(body(300000, 6)).slice(0, 12)}`);
	console.log('net server destroy(): ' + await net_case(nport, 'DESTROY 1000000\n', body(1e6, 7), 'none') +
		` want ${sha(body(1e6, 7)).slice(0, 12)}`);
	console.log('net client destroy(): ' + await net_case(nport, 'ECHO\n', body(2e6, 8), 'destroy'));
	console.error(`  net: ${Date.now() - t0} ms`);
	}
	// what the server saw: wait (5 s at most) until it has seen all five endings
	let seen = [];
	for (let i = 0; i < 50; i++) {
		seen = JSON.parse(await new Promise((res, rej) =>
			http.get({ agent, port: hport, host: '127.0.0.1', path: '/seen' }, (r) => {
				let s = '';
				r.on('data', (d) => { s += d; });
				r.on('end', () => res(s));
			}).on('error', rej)));
		if (seen.length >= (steps.includes('abort') ? 1 : 0) + (steps.includes('net') ? 4 : 0)) break;
		await sleep(100);
	}
	for (const s of seen.sort()) console.log('server saw: ' + s);
	agent.destroy();
	console.error(`  total: ${Date.now() - t0} ms`);
}

console.log('# pid ' + process.pid);
if (process.argv[2] === 'server') server(process.argv[3]);
else client(Number(process.argv[3]), Number(process.argv[4]), process.argv.slice(5).length ? process.argv.slice(5) : ['get', 'upload', 'abort', 'net']);
