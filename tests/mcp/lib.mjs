// tests/mcp/lib.mjs — what the MCP test clients share: the official SDK
// (tests/npm, pinned) loaded from WARD_SDK (its dist/esm directory), and
// the checks. A failed check prints "FAIL: why" and exits 1.
import { readdirSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

// The SDK module at dist/esm/<path>.
export function sdk(path) {
	return import(pathToFileURL(`${process.env.WARD_SDK}/${path}`));
}
export function fail(msg) {
	console.log(`FAIL: ${msg}`);
	process.exit(1);
}
export function check(cond, msg, extra) {
	if (!cond)
		fail(`${msg}${extra === undefined ? '' : ': ' + JSON.stringify(extra).slice(0, 2000)}`);
}
// A tool result's text content, joined.
export function text(r) {
	return r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}
// Polls cond (async) every 50 ms until it holds, or fails after ms.
export async function until(what, cond, ms = 15000) {
	const end = Date.now() + ms;
	while (!(await cond())) {
		if (Date.now() > end)
			fail(`timed out waiting for ${what}`);
		await new Promise((r) => setTimeout(r, 50));
	}
}
// A process on this host whose command line holds marker.
export function running(marker) {
	for (const pid of readdirSync('/proc')) {
		if (!/^\d+$/.test(pid))
			continue;
		try {
			if (readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(marker))
				return true;
		} catch {}
	}
	return false;
}
