// OpenAI's official npm client against `attograd serve` (tests/cli/serve_test.sh
// openai_client): a completion, a chat reply, the same reply streamed, n choices and an
// error, printed as one JSON object for the script to compare with `attograd sample`.
//   node openai_client.mjs PLAIN_URL PLAIN_MODEL PROMPT CHAT_URL CHAT_MODEL QUESTION MAX_TOKENS
// (a plain language model's server for completions, a chat model's for chat)
import OpenAI from 'openai';

const [plainURL, plainModel, prompt, chatURL, model, question, maxTokens] = process.argv.slice(2);
const options = { apiKey: 'none', maxRetries: 0, timeout: 60000 };
const plain = new OpenAI({ baseURL: plainURL, ...options });
const client = new OpenAI({ baseURL: chatURL, ...options });
const max_tokens = Number(maxTokens);
const messages = [{ role: 'user', content: question }];
const out = {};

const completion = await plain.completions.create({
  model: plainModel, prompt, max_tokens, temperature: 0,
});
out.completion = completion.choices[0].text;
out.usage = completion.usage;

const chat = await client.chat.completions.create({ model, messages, max_tokens, temperature: 0 });
out.chat = chat.choices[0].message.content;
out.chat_finish = chat.choices[0].finish_reason;

const stream = await client.chat.completions.create({
  model, messages, max_tokens, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
out.stream = '';
for await (const chunk of stream) {
  out.stream += chunk.choices[0]?.delta?.content ?? '';
  if (chunk.usage) out.stream_usage = chunk.usage;
}

const many = await plain.completions.create({
  model: plainModel, prompt, max_tokens, temperature: 0, n: 3,
});
out.n = many.choices.map((c) => c.text);

try {
  await client.chat.completions.create({ model, messages, temperature: -1 });
  out.error = 'none';
} catch (e) {
  out.error = `${e.status} ${e.param ?? e.error?.param}`;
}
out.models = (await plain.models.list()).data.map((m) => m.id);
out.chat_models = (await client.models.list()).data.map((m) => m.id);
console.log(JSON.stringify(out));
