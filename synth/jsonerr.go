package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jsonFault is a JSON decoding error located: every reader of JSON input
// in synth (ShareGPT records, JSONL imports, vLLM configs) reports it the
// same way, as a *RowError naming file, line, column and field.
type jsonFault struct {
	// off is the byte offset of the error, -1 when unknown. For a type
	// error it counts from the start of the value being decoded (a record,
	// a line) and points just past the offending value; for a syntax error
	// it is the offending byte, counted from the start of the decoder's
	// input.
	off      int64
	relative bool   // off is a type error's, relative to the decoded value
	field    string // the field of a type error ("conversations.value")
	err      error  // what was found and what was expected
}

// jsonFaultOf locates err, an error of encoding/json.
func jsonFaultOf(err error) jsonFault {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return jsonFault{off: te.Offset, relative: true, field: te.Field, err: fmt.Errorf("want %s, found JSON %s", te.Type, te.Value)}
	case errors.As(err, &se):
		return jsonFault{off: max(se.Offset-1, 0), err: fmt.Errorf("malformed JSON: %w", err)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return jsonFault{off: -1, err: errors.New("malformed JSON: unexpected end of file")}
	}
	return jsonFault{off: -1, err: fmt.Errorf("malformed JSON: %w", err)}
}

// rowError places the fault in file path: at byte off of content (the
// bytes whose first line is line; nil when off cannot be placed), with
// context (e.g. "record 3") before what was wrong.
func (f jsonFault) rowError(path string, content []byte, line int, off int64, context string) *RowError {
	e := &RowError{File: path, Line: line, Field: f.field, Err: f.err}
	if content != nil && off >= 0 {
		l, c := lineCol(content, off)
		e.Line, e.Column = line+l-1, c
	}
	if context != "" {
		e.Err = fmt.Errorf("%s: %w", context, e.Err)
	}
	return e
}

// lineCol is the 1-based line and column of byte offset off of b.
func lineCol(b []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(b)))
	prefix := b[:off]
	line := bytes.Count(prefix, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(prefix, '\n') + 1) + 1
	return line, col
}
