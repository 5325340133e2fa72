// Package chunked reads and writes HTTP/1.1's chunked transfer coding
// (RFC 9112 section 7.1), the framing of streamed response bodies.
//
// In: the raw bytes of a body as they come off a connection, in pieces of
// any size (Scanner.Scan). Out: where the data of its chunks lies in them
// (sub-slices, nothing copied), and where the body ends, so that the
// bytes of a next response are never taken for this one. AppendChunk and
// AppendHex frame data. The capture proxy forwards the raw bytes and taps
// the data; replay's client moves the data to the front of its read.
package chunked
