// Package jsonpos locates an encoding/json decoding error in its input:
// what flows in is the error (and the input's bytes), what flows out is
// the byte offset it is at, the field of a type error, what was wrong,
// and the 1-based line and column of an offset. synth's readers of JSON
// files and sweep's summary reader report positions through it, so one
// input position prints alike everywhere.
//
// Offsets: json.SyntaxError.Offset counts the bytes read up to and
// including the offending one, so the offending byte is Offset - 1 (from
// the start of the decoder's input). json.UnmarshalTypeError.Offset points
// just past the offending value and counts from the start of the value
// being decoded (a record, a line): Relative says so.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Fault is a located JSON decoding error.
type Fault struct {
	Off      int64  // 0-based byte offset, -1 when unknown
	Relative bool   // Off is a type error's, relative to the decoded value
	Field    string // the field of a type error ("conversations.value")
	Err      error  // what was found and what was expected
}

// Locate locates err, an error of encoding/json.
func Locate(err error) Fault {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return Fault{Off: te.Offset, Relative: true, Field: te.Field, Err: fmt.Errorf("want %s, found JSON %s", te.Type, te.Value)}
	case errors.As(err, &se):
		return Fault{Off: max(se.Offset-1, 0), Err: fmt.Errorf("malformed JSON: %w", err)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Fault{Off: -1, Err: errors.New("malformed JSON: unexpected end of file")}
	}
	return Fault{Off: -1, Err: fmt.Errorf("malformed JSON: %w", err)}
}

// LineCol is the 1-based line and column of byte offset off of b (off is
// clamped into b).
func LineCol(b []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(b)))
	prefix := b[:off]
	line = bytes.Count(prefix, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(prefix, '\n') + 1) + 1
	return line, col
}

// At is "line L, column C" of a fault at an offset of b counted from its
// start; "" when the offset is unknown.
func (f Fault) At(b []byte) string {
	if f.Off < 0 {
		return ""
	}
	l, c := LineCol(b, f.Off)
	return fmt.Sprintf("line %d, column %d", l, c)
}
