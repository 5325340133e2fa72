//go:build race

package blocktext

// raceOn: the race detector slows encoding ~10x; the longest texts are
// left to the plain test run.
const raceOn = true
