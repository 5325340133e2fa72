// Package fielderr is the error a library returns about its options: it
// names the options struct's fields by their Go names (Targets, Speed),
// which a Go caller understands, and lets a front end, the tracekit
// command, name them as its own settings (--target, --speed) instead.
//
// In: the options type and the field at fault, and a message whose field
// names are Name arguments. Out: an *Error; Error names the Go fields, Text
// names them as the front end asks.
package fielderr
