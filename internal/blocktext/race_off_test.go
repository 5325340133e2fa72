//go:build !race

package blocktext

const raceOn = false
