//go:build !linux

package stamp

import (
	"errors"
	"net"
	"sync/atomic"
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

// PushFunc receives a pushed connection's bytes (Linux only).
type PushFunc func(p []byte, stampNs int64, err error) (more bool)

// Push reports false: connections are read with Read.
func (c *Conn) Push(scratch []byte, fn PushFunc) bool { return false }

// Unpush does nothing: there is no push.
func (c *Conn) Unpush() {}

// Pending is 0: nothing is kept back.
func (c *Conn) Pending() int { return 0 }

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

// tap is Linux-only.
type tap struct{ drops atomic.Int64 }

func acquireTap() (*tap, error) { return nil, errors.New("the packet tap needs Linux") }

func releaseTap(*tap) {}

// dropped is 0: there is no ring to drop segments.
func (t *tap) dropped() int64 { return 0 }
