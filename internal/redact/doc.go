// Package redact keeps credentials out of everything tracekit stores or
// prints. A server may echo the key it was sent ("401 Incorrect API key
// provided: Bearer sk-..."), in its error body or in a streamed error
// event; tracekit knows the values it sends (the API key, credential-like
// headers, URL credentials) and capture learns those its clients send, so
// a Scrubber replaces every one of them in a message, and any
// "Bearer <token>" or "Basic <token>" besides.
//
// In: secret values (Add, AddHeader, AddURL). Out: messages with each one
// replaced by Redacted (Scrub, Error, Writer). It is applied where
// messages enter a record (record.Recorder) or a log (the commands'
// stdout and stderr), not by each producer of a message.
package redact
