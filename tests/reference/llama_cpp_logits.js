// Compares llama.cpp's logits with attograd's on the same ids, for reference.llama_cpp_quant.
//   node llama_cpp_logits.js LLAMA.json ATTOGRAD.safetensors PROMPT_LENGTH TOLERANCE
// LLAMA.json: one line of llama_cpp_decode.mjs run with LOGITS=1 ("generated": llama.cpp's
// greedy ids after the prompt, "logits": its raw logits for the row before each of them).
// ATTOGRAD.safetensors: the interop driver's forward of the prompt and those ids ("logits":
// rows x vocab, row r predicting id r + 1). Prints one line: the largest difference of any
// logit, how many of llama.cpp's greedy ids are attograd's greedy choice too, and where they
// part, how far llama.cpp's id is below attograd's top there (in attograd's logits). Exits 1
// where a logit differs by more than TOLERANCE or a row is missing.
const fs = require("fs");
const [llamaFile, oursFile, promptArg, toleranceArg] = process.argv.slice(2);
const theirs = JSON.parse(fs.readFileSync(llamaFile, "utf8"));
const bytes = fs.readFileSync(oursFile);
const headerBytes = Number(bytes.readBigUInt64LE(0));
const header = JSON.parse(bytes.toString("utf8", 8, 8 + headerBytes));
const [rows, vocab] = header.logits.shape;
const base = 8 + headerBytes + header.logits.data_offsets[0];
const ours = (row, id) => bytes.readFloatLE(base + 4 * (row * vocab + id));
const first = Number(promptArg) - 1, tolerance = Number(toleranceArg);

const generated = theirs.generated, logits = theirs.logits ?? [];
if (logits.length !== generated.length || first + generated.length > rows) {
  console.log(`llama.cpp gave ${logits.length} rows of logits for ${generated.length} ids`);
  process.exit(1);
}
let largest = 0, where = "", agree = -1, gap = 0;
generated.forEach((id, k) => {
  const row = first + k;
  let top = 0;
  for (let i = 0; i < vocab; ++i) {
    const difference = Math.abs((logits[k][i] ?? NaN) - ours(row, i));  // NaN stays the largest
    if (!(difference <= largest) && !Number.isNaN(largest)) {
      [largest, where] = [difference, `row ${k} id ${i}`];
    }
    if (ours(row, i) > ours(row, top)) top = i;
  }
  if (agree < 0 && top !== id) [agree, gap] = [k, ours(row, top) - ours(row, id)];
});
const same = agree < 0 ? generated.length : agree;
const parting = agree < 0 ? "" : `, then llama.cpp's is ${gap.toFixed(4)} below attograd's top`;
console.log(`logits within ${largest.toFixed(4)} (at ${where}); greedy ids the same for ` +
  `${same} of ${generated.length}${parting}`);
process.exit(largest <= tolerance ? 0 : 1);
