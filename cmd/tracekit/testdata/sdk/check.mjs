// check.mjs drives the official OpenAI and Anthropic SDKs against a
// running `tracekit mock` and prints one JSON line: the SDK versions and,
// per check, what the SDK made of the answer. It throws (exit 1) on the
// first answer an SDK rejects or that lacks what the check expects; the
// Go test (sdk_test.go) compares the numbers with the mock's log.
//
// Run from a folder whose node_modules holds openai and @anthropic-ai/sdk
// (`make sdk-check` sets one up): node check.mjs http://127.0.0.1:PORT
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const base = process.argv[2];
const version = (pkg) => JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version;
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'sk-check', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'sk-ant-check', maxRetries: 0 });
const must = (ok, what) => { if (!ok) throw new Error(what); };
const out = { openai: version('openai'), anthropic: version('@anthropic-ai/sdk'), checks: {} };

// Responses, streamed: every event read to the end, then the final response.
{
  const stream = openai.responses.stream(
    { model: 'm', instructions: 'be brief', input: 'hello there', max_output_tokens: 64 },
    { headers: { 'X-Request-Id': 'sdk-responses', 'X-Tracekit-Reasoning-Tokens': '3' } });
  const types = {};
  let text = '', reasoning = '';
  for await (const ev of stream) {
    types[ev.type] = (types[ev.type] || 0) + 1;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.reasoning_text.delta') reasoning += ev.delta;
  }
  const final = await stream.finalResponse();
  must(final.status === 'completed', `responses: status ${final.status}`);
  must(final.output_text === text && text.length > 0, `responses: output_text ${JSON.stringify(final.output_text)}, deltas ${JSON.stringify(text)}`);
  // A second turn continues the first through previous_response_id.
  const next = await openai.responses.create({ model: 'm', previous_response_id: final.id, input: 'go on', max_output_tokens: 64 },
    { headers: { 'X-Request-Id': 'sdk-responses-2' } });
  must(next.status === 'completed' && next.output_text.length > 0, `responses: second turn ${JSON.stringify(next)}`);
  out.checks.responses = { id: final.id, text, reasoning, usage: final.usage, events: types, next_usage: next.usage };
}

// Embeddings: the SDK asks for base64 and decodes it to floats.
{
  const r = await openai.embeddings.create({ model: 'm', input: ['one two', 'three'] }, { headers: { 'X-Request-Id': 'sdk-embeddings' } });
  must(r.data.length === 2 && r.data.every((d) => Array.isArray(d.embedding) && d.embedding.every(Number.isFinite)), 'embeddings: data');
  out.checks.embeddings = { items: r.data.length, dims: r.data[0].embedding.length, usage: r.usage };
}

// Chat completions, streamed, usage in the last chunk.
{
  const stream = await openai.chat.completions.create(
    { model: 'm', stream: true, stream_options: { include_usage: true }, max_tokens: 64, messages: [{ role: 'user', content: 'hello there' }] },
    { headers: { 'X-Request-Id': 'sdk-chat' } });
  let text = '', chunks = 0, usage = null, finish = null;
  for await (const c of stream) {
    chunks++;
    if (c.choices.length > 0) {
      text += c.choices[0].delta.content || '';
      finish = c.choices[0].finish_reason || finish;
    }
    if (c.usage) usage = c.usage;
  }
  must(text.length > 0 && usage && finish, `chat: text ${JSON.stringify(text)}, usage ${JSON.stringify(usage)}, finish ${finish}`);
  out.checks.chat = { text, chunks, usage, finish };
}

// Anthropic Messages, streamed with thinking: the final message.
{
  const stream = anthropic.messages.stream(
    { model: 'm', max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, system: 'be brief',
      messages: [{ role: 'user', content: 'hello there' }] },
    { headers: { 'X-Request-Id': 'sdk-messages', 'X-Tracekit-Reasoning-Tokens': '3' } });
  let text = '';
  stream.on('text', (t) => { text += t; });
  const msg = await stream.finalMessage();
  const thinking = msg.content.find((b) => b.type === 'thinking');
  const answer = msg.content.find((b) => b.type === 'text');
  must(thinking && thinking.thinking.length > 0 && thinking.signature, `messages: thinking block ${JSON.stringify(msg.content)}`);
  must(answer && answer.text === text && text.length > 0, `messages: text ${JSON.stringify(answer)}, deltas ${JSON.stringify(text)}`);
  out.checks.messages = { id: msg.id, text, thinking: thinking.thinking, stop_reason: msg.stop_reason, usage: msg.usage };
}

console.log(JSON.stringify(out));
