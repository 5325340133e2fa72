// Package mocktest starts the in-process mock server for tests: the one
// way tests of every package get a real LLM server on loopback. It is
// apart from package mock so that the tracekit binary, which links mock,
// does not link package testing.
//
// In: a testing.TB and a change to Fast, the shared test model (or a
// whole mock.Config). Out: a running *mock.Server, closed when the test
// ends.
package mocktest
