// llama.cpp itself (the npm package node-llama-cpp's prebuilt CPU build, offline) on a GGUF
// file attograd wrote: loads it, tokenizes a text, and greedily decodes from given ids.
//   [STOP_AT_EOG=1] node llama_cpp_decode.mjs NPM_DIR FILE.gguf TOKENS TEXTS_DIR IDS... [, IDS...]...
// Prints one JSON line: {"tokenized": {NAME: the ids llama.cpp gives TEXTS_DIR/NAME.txt (no
// BOS)}, "generated": the TOKENS ids it picks after IDS at temperature 0, "generations" and
// "stops": "generated" and "stop" of each prompt when "," parts IDS into several, each
// decoded from an empty cache (one process: loading llama.cpp is most of a prompt's time),
// "architecture":
// general.architecture, "bos", "eos", "eot": the ids llama.cpp takes for them (or null),
// "wrapper": the class of the chat wrapper node-llama-cpp resolves from the file's chat
// template, "stop": with STOP_AT_EOG=1, the end-of-generation id that ended "generated"
// before TOKENS (else null)}; TEXTS_DIR "-": none. NPM_DIR holds node_modules/node-llama-cpp.
// FILE.list instead of FILE.gguf: a file of GGUF paths, one a line, each loaded in turn by
// the one llama.cpp this process loaded (its start is most of a small file's time), one JSON
// line each, in order, with "file" its path. LORA=ADAPTER.gguf: llama.cpp's LoRA adapter
// loaded onto each model's context at scale 1 (attograd's export --format gguf-lora).
// LOGITS=1: "logits" also holds llama.cpp's raw logits (an array of vocabulary length) for
// the row before each id generated after the first prompt, the prompt and those ids
// evaluated again from an empty cache (else null).
import { pathToFileURL } from "node:url";
import fs from "node:fs";
import path from "node:path";

const [npmDir, file, count, textsDir, ...ids] = process.argv.slice(2);
const prompts = ids.join(" ").split(",").map((part) => part.trim().split(/ +/).filter((id) => id !== "").map(Number))
  .filter((prompt, i, all) => prompt.length > 0 || all.length === 1);  // "1 2 ," is one prompt
const entry = path.join(npmDir, "node_modules", "node-llama-cpp", "dist", "index.js");
const { getLlama, LlamaLogLevel, resolveChatWrapper } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });

// The COUNT ids llama.cpp picks after PROMPT at temperature 0, and with STOP_AT_EOG=1 the
// end-of-generation id that ended them sooner (else null)
async function greedy(model, sequence, prompt) {
  const generated = [];
  let stop = null;
  const stopAtEog = process.env.STOP_AT_EOG === "1";
  if (Number(count) > 0) {
    const options = { temperature: 0, yieldEogToken: stopAtEog };  // to say which id stopped it
    for await (const token of sequence.evaluate(prompt, options)) {
      if (stopAtEog && model.isEogToken(token)) {
        stop = token;
        break;
      }
      generated.push(token);
      if (generated.length >= Number(count)) break;
    }
  }
  return { generated, stop };
}

// With LOGITS=1, teacher-forced: the prompt and the generated ids again, from an empty
// cache, with the raw logits of every row that predicts a generated id (else null)
async function teacherForcedLogits(model, sequence, prompt, generated) {
  if (process.env.LOGITS !== "1" || generated.length === 0) return null;
  await sequence.clearHistory();
  const ids = prompt.concat(generated.slice(0, -1));
  const first = prompt.length - 1;
  const input = ids.map((id, i) => (i < first ? id : [id, { generateNext: { logits: true } }]));
  const rows = await sequence.controlledEvaluate(input);
  const vocab = model.tokens.size ?? model.vocabularySize;
  return rows.slice(first).map((row) => {
    const out = new Array(vocab).fill(null);
    for (const [token, value] of row.next.logits) out[token] = value;
    return out;
  });
}

async function run(file) {
  const model = await llama.loadModel({ modelPath: path.resolve(file) });
  // keys and values cached in F32 (llama.cpp's default is F16, which rounds them); one
  // thread: llama.cpp's threads wait for each other spinning, and on a 2-core machine with
  // anything else running a token took 0.5 s instead of 5 ms (each of ggml's sums is one
  // thread's whatever their number, so the tokens are the same)
  const context = await model.createContext({
    contextSize: 256,
    threads: 1,
    sequences: 1,
    flashAttention: false,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
    ...(process.env.LORA ? { lora: { adapters: [{ filePath: path.resolve(process.env.LORA), scale: 1 }] } } : {}),
  });
  const sequence = context.getSequence();
  const generations = [];
  const stops = [];
  let logits = null;
  for (const prompt of prompts) {
    if (generations.length > 0) await sequence.clearHistory();
    const { generated, stop } = await greedy(model, sequence, prompt);
    generations.push(generated);
    stops.push(stop);
    if (logits === null) logits = await teacherForcedLogits(model, sequence, prompt, generated);
  }
  const tokenized = {};
  const names = textsDir === "-" ? [] : fs.readdirSync(textsDir).filter((n) => n.endsWith(".txt"));
  for (const name of names.sort()) {
    const text = fs.readFileSync(path.join(textsDir, name), "utf8");
    tokenized[name.slice(0, -4)] = Array.from(model.tokenize(text, false));
  }
  const architecture = model.fileInfo?.metadata?.general?.architecture ?? "";
  const { bos, eos, eot } = model.tokens;
  const wrapper = resolveChatWrapper(model)?.constructor?.name ?? null;
  const [generated, stop] = [generations[0], stops[0]];
  const out = { file, tokenized, generated, generations, architecture, bos, eos, eot, wrapper, stop, stops, logits };
  process.stdout.write(JSON.stringify(out) + "\n");
  await context.dispose();
  await model.dispose();
}

const files = file.endsWith(".list")
  ? fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "")
  : [file];
for (const one of files) await run(one);
await llama.dispose();
