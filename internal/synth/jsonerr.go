package synth

import (
	"fmt"

	"github.com/tracekit/tracekit/internal/jsonpos"
)

// jsonFault is a JSON decoding error located (internal/jsonpos): every
// reader of JSON input in synth (ShareGPT records, JSONL imports, vLLM
// configs) reports it the same way, as a *RowError naming file, line,
// column and field.
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
	f := jsonpos.Locate(err)
	return jsonFault{off: f.Off, relative: f.Relative, field: f.Field, err: f.Err}
}

// rowError places the fault in file path: at byte off of content (the
// bytes whose first line is line; nil when off cannot be placed), with
// context (e.g. "record 3") before what was wrong.
func (f jsonFault) rowError(path string, content []byte, line int, off int64, context string) *RowError {
	e := &RowError{File: path, Line: line, Field: f.field, Err: f.err}
	if content != nil && off >= 0 {
		l, c := jsonpos.LineCol(content, off)
		e.Line, e.Column = line+l-1, c
	}
	if context != "" {
		e.Err = fmt.Errorf("%s: %w", context, e.Err)
	}
	return e
}
