// Package resultschema holds the contract of tracekit's JSON results: the
// JSON Schema (draft 2020-12) in docs/schema/tracekit-result.v1.json, one
// root definition per output (analyze --json for a run and for a run set,
// compare --verdict, sweep.json, calibrate --json).
//
// In: the schema file and a result file's bytes. Out: Validate's error,
// naming every key or value the schema refuses. Objects whose key set is
// fixed are closed (additionalProperties false), so a key the code writes
// and the schema lacks fails validation.
//
// The schema is generated from the Go types that encode the results (their
// json tags, and their doc comments as descriptions) by this package's
// tests, which also write the key reference docs/results-json.md from it:
// go test ./internal/resultschema -run TestSchemaUpToDate -update.
package resultschema
