package fielderr

import "fmt"

// Name is an argument of Errorf's format that names a field of the same
// options type: it is written as the Go field name by Error and as the
// front end's name for it by Text.
type Name string

// Error says that a field of an options struct holds a value the library
// does not take, or that the fields it names do not go together.
type Error struct {
	Struct string // the options type, package-qualified: "replay.Config"
	Field  string // the field at fault: "Speed"

	format string
	args   []any
	err    error // the message with Go names, for Error and Unwrap
}

// Errorf returns an *Error about field of the options type st, its message
// formatted as fmt.Errorf does (%w wraps). A message that names no field
// (no Name argument) is about field, and Error starts it with the field's
// name.
func Errorf(st, field, format string, args ...any) *Error {
	e := &Error{Struct: st, Field: field, format: format, args: args}
	e.err = fmt.Errorf(format, e.render(func(f string) string { return f })...)
	return e
}

// NamesFields reports whether the message names its fields itself; if not,
// it is about Field and a front end says which setting that is.
func (e *Error) NamesFields() bool {
	for _, a := range e.args {
		if _, ok := a.(Name); ok {
			return true
		}
	}
	return false
}

func (e *Error) Error() string {
	if !e.NamesFields() {
		return e.Field + ": " + e.err.Error()
	}
	return e.err.Error()
}

// Text is the message with each field it names written name(field). A
// message that names no field comes without the field: the caller writes
// it its own way (NamesFields).
func (e *Error) Text(name func(field string) string) string {
	return fmt.Errorf(e.format, e.render(name)...).Error()
}

// Unwrap returns the errors the message wraps (%w).
func (e *Error) Unwrap() []error {
	switch u := e.err.(type) {
	case interface{ Unwrap() error }:
		return []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// render returns the arguments with each Name written name(field).
func (e *Error) render(name func(string) string) []any {
	out := make([]any, len(e.args))
	for i, a := range e.args {
		if n, ok := a.(Name); ok {
			a = name(string(n))
		}
		out[i] = a
	}
	return out
}

// All returns the *Errors in err's chain, outermost first.
func All(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if fe, ok := err.(*Error); ok {
			out = append(out, fe)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}
