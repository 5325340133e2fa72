//go:build !unix

package tokenizer_test

import "time"

// processCPU is unknown here: benchmarks report wall time only.
func processCPU() time.Duration { return 0 }
