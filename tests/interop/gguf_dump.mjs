// What the npm package @huggingface/gguf (an independent GGUF parser) reads from a file, as
// JSON on stdout: the header's counts, every key with its GGUF type (and element type for
// arrays) and value, the data section's offset and every tensor's name, shape, type and
// offset. Big integers are written as decimal strings.
//   node gguf_dump.mjs NPM_DIR FILE.gguf   (NPM_DIR holds node_modules/@huggingface/gguf)
import { pathToFileURL } from "node:url";
import path from "node:path";

const [npmDir, file] = process.argv.slice(2);
const entry = path.join(npmDir, "node_modules", "@huggingface", "gguf", "dist", "index.mjs");
const { gguf } = await import(pathToFileURL(entry).href);
const parsed = await gguf(path.resolve(file), { allowLocalFile: true, typedMetadata: true });

const plain = (v) =>
  typeof v === "bigint" ? v.toString() : Array.isArray(v) ? v.map(plain) : v;
const keys = {};
for (const [key, typed] of Object.entries(parsed.typedMetadata)) {
  keys[key] = { type: typed.type, value: plain(typed.value) };
  if (typed.subType !== undefined) keys[key].subType = typed.subType;
}
const tensors = parsed.tensorInfos.map((t) => ({
  name: t.name,
  shape: t.shape.map(plain),
  dtype: t.dtype,
  offset: plain(t.offset),
}));
process.stdout.write(
  JSON.stringify({ keys, tensors, tensorDataOffset: plain(parsed.tensorDataOffset) }) + "\n");
