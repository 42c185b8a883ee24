// Hugging Face tokenizers (the npm package `tokenizers`, its Rust core) on a tokenizer.json
// attograd wrote: the ids of each text, and the text those ids decode to. All the texts in
// one process: node and the package load once (a second or so each under load).
//
//   node hf_tokenizer.js NODE_MODULES TOKENIZER_JSON OUT_DIR TEXT...
//       OUT_DIR/NAME.ids and OUT_DIR/NAME.text for each TEXT named NAME.txt
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, file, outDir, ...textFiles] = process.argv.slice(2);
const { Tokenizer } = require(path.resolve(modules, 'tokenizers'));

(async () => {
  const tok = Tokenizer.fromFile(file);
  fs.mkdirSync(outDir, { recursive: true });
  for (const textFile of textFiles) {
    const name = path.join(outDir, path.basename(textFile, '.txt'));
    const text = fs.readFileSync(textFile, 'utf8');
    const encoding = await tok.encode(text, null, { addSpecialTokens: false });
    const ids = encoding.getIds();
    fs.writeFileSync(name + '.ids', ids.join(' ') + '\n');
    fs.writeFileSync(name + '.text', await tok.decode(ids, false));
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
