// Hugging Face tokenizers (the npm package `tokenizers`, its Rust core) on a tokenizer.json
// attograd wrote: the ids of each text, and the text those ids decode to.
//
//   node hf_tokenizer.js NODE_MODULES TOKENIZER_JSON TEXT IDS_OUT TEXT_OUT
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, file, textFile, idsOut, textOut] = process.argv.slice(2);
const { Tokenizer } = require(path.resolve(modules, 'tokenizers'));

(async () => {
  const tok = Tokenizer.fromFile(file);
  const text = fs.readFileSync(textFile, 'utf8');
  const encoding = await tok.encode(text, null, { addSpecialTokens: false });
  const ids = encoding.getIds();
  fs.writeFileSync(idsOut, ids.join(' ') + '\n');
  fs.writeFileSync(textOut, await tok.decode(ids, false));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
