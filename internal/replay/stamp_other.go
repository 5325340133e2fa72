//go:build !linux

package replay

import (
	"errors"
	"net"
)

func kernelStampsUnsupported() string { return "SO_TIMESTAMPING receive stamps need Linux" }

// rxConn is Linux-only; elsewhere newRxConn always fails and connections
// keep goroutine stamps (newStamper never asks for it there).
type rxConn struct{ net.Conn }

func newRxConn(nc net.Conn, split bool, st *stamper) (*rxConn, error) {
	return nil, errors.New("kernel receive stamps need Linux")
}

func (c *rxConn) lastNs() int64 { return 0 }

// observer is Linux-only.
type observer struct{ priority string }

func startObserver() (*observer, error) { return nil, errors.New("the arrival observer needs Linux") }

func (o *observer) stop() {}

func (o *observer) cpuNs() int64 { return 0 }
