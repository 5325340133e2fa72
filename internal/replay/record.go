package replay

import (
	"context"

	"github.com/tracekit/tracekit/internal/record"
)

// Open creates the sink a run records into. Record calls it once the
// targets passed Prepare, so a run that cannot start creates nothing; it
// may also start watching r (Stats) for progress.
type Open func(r *Runner) (record.Sink, error)

// Into is the Open of a sink that exists already.
func Into(sink record.Sink) Open {
	return func(*Runner) (record.Sink, error) { return sink, nil }
}

// ConfigError is Record's error for a configuration New refuses (or a
// source it cannot open): nothing was sent.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// PrepareError is Record's error when the targets failed before the clock
// started (ready checks, model lookup, probe): nothing was sent and open
// was not called.
type PrepareError struct{ Err error }

func (e *PrepareError) Error() string { return e.Err.Error() }
func (e *PrepareError) Unwrap() error { return e.Err }

// Record replays src (nil: the trace file cfg.Trace) against cfg.Targets:
// New, Prepare, open, Run, Close. It returns Run's result; the caller
// closes the sink open made. Errors before any request was sent are a
// *ConfigError or a *PrepareError; open's error is returned as it is.
func Record(ctx context.Context, cfg Config, src Source, open Open) (*Result, error) {
	r, err := New(cfg, src)
	if err != nil {
		return nil, &ConfigError{err}
	}
	defer r.Close()
	if err := r.Prepare(ctx); err != nil {
		return nil, &PrepareError{err}
	}
	sink, err := open(r)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, sink)
}
