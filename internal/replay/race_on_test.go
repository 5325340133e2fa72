//go:build race

package replay

// raceOn: under the race detector sync.Pool drops a share of what is put
// back, so allocation counts are left to the plain test run.
const raceOn = true
