// serve_load.py's clients as OpenAI's official npm client (`openai`, tools/npm_fixtures.sh):
// what a program built on the client sees, the client's own parsing of every chunk included.
// All clients live in this one Node process (one thread, as an application's would), which
// runs serve_load.py's whole schedule so that its JIT stays warm from run to run:
//
//   node serve_load_openai.mjs FIXTURES URL CLIENTS TOKENS REPEATS WARMUPS TIMEOUT_S
//
// Prints one JSON line a measured run: {"clients": k, "elapsed": s, "cpu": s (this
// process's), "results": [[time to first token s, tokens, seconds], ...]}: REPEATS pairs of
// one stream and CLIENTS streams, after WARMUPS single runs and (WARMUPS > 0) one run of
// CLIENTS streams, not printed, which warm the JIT and the server's paces. A token is a
// chunk whose choice has no finish reason yet, as serve_load.py counts them; a failed
// request ends the process with its error on stderr (exit 1).
import { createRequire } from 'node:module';
import path from 'node:path';

const [fixtures, url, clients, tokens, repeats, warmups, timeout] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(fixtures), 'node_modules', 'x.js'));
const { OpenAI } = require('openai');
const client = new OpenAI({
  baseURL: url, apiKey: 'none', maxRetries: 0, timeout: Number(timeout) * 1000,
});

async function stream(seed) {
  const start = performance.now();
  const chunks = await client.completions.create({
    model: 'served', prompt: '', max_tokens: Number(tokens), temperature: 1, seed, stream: true,
  });
  let first = null;
  let count = 0;
  for await (const chunk of chunks) {
    if (chunk.choices[0] && chunk.choices[0].finish_reason == null) {
      if (first === null) first = (performance.now() - start) / 1000;
      count += 1;
    }
  }
  return [first, count, (performance.now() - start) / 1000];
}

async function run(k, print = true) {
  const start = performance.now();
  const cpu = process.cpuUsage();
  const results = await Promise.all(Array.from({ length: k }, (_, i) => stream(i + 1)));
  const used = process.cpuUsage(cpu);
  if (print) console.log(JSON.stringify({
    clients: k, elapsed: (performance.now() - start) / 1000,
    cpu: (used.user + used.system) / 1e6, results,
  }));
}

try {
  for (let i = 0; i < Number(warmups); i += 1) await run(1, false);
  if (Number(warmups) > 0) await run(Number(clients), false);
  for (let i = 0; i < Number(repeats); i += 1) {
    await run(1);
    await run(Number(clients));
  }
} catch (e) {
  console.error(`openai client: ${e.message}`);
  process.exit(1);
}
