//go:build !linux

package stamp

import (
	"errors"
	"net"
)

func kernelStampsUnsupported() string { return "SO_TIMESTAMPING receive stamps need Linux" }

// clientCPUs is 0: there is no observer to place but on Linux.
func clientCPUs() int { return 0 }

// Conn is Linux-only; elsewhere newConn always fails and connections keep
// goroutine stamps (New never asks for it there).
type Conn struct{ net.Conn }

func newConn(nc net.Conn, split bool, st *Source) (*Conn, error) {
	return nil, errors.New("kernel receive stamps need Linux")
}

// Last is 0: there are no kernel stamps.
func (c *Conn) Last() int64 { return 0 }

// ObserverMain returns at once: there is no arrival observer but on
// Linux.
func ObserverMain() {}

// observer is Linux-only.
type observer struct{ priority string }

func startObserver() (*observer, error) { return nil, errors.New("the arrival observer needs Linux") }

func (o *observer) stop() {}

func acquireObserver() (*observer, error) { return startObserver() }

func releaseObserver(o *observer) { o.stop() }

func (o *observer) cpuNs() int64 { return 0 }
