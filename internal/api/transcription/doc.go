// Package transcription is speech-to-text: /v1/audio/transcriptions and
// /v1/audio/translations (OpenAI's, vLLM's). A request is a
// multipart/form-data upload of one audio file with form fields; the
// answer is a transcript, streamed where the server supports it, in one of
// two shapes:
//
//   - OpenAI: transcript.text.delta events ({"type", "delta"}), ended by
//     transcript.text.done ({"text", "usage":{"type":"tokens",
//     input_tokens, output_tokens, total_tokens}});
//   - vLLM: chat-shaped chunks (object transcription.chunk or
//     translation.chunk, choices[].delta.content), a usage-only chunk when
//     stream_include_usage asked for it, then data: [DONE].
//
// Non-streaming bodies are {"text", "usage"}, the usage either in tokens
// (OpenAI's gpt-4o models) or {"type":"duration","seconds"} (vLLM,
// whisper-1), which reports no tokens.
//
// In: a turn's audio item and text prompt (AppendRequest); a response's
// events or body (Decoder). Out: the request body and its Content-Type; the
// transcript text, output events and usage; for the mock, either stream
// shape or body (Encoder).
package transcription
